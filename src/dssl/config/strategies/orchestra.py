"""Orchestra's options (``strategies.<entry>`` of ``name: orchestra``), declared once.

References:
    [0] Orchestra, 2022, https://arxiv.org/abs/2205.11506
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from dssl.config.ranges import Range
from dssl.config.strategies import StrategySpec
from dssl.config.strategies._base import StrategyConfig


@dataclass(frozen=True)
class OrchestraConfig(StrategyConfig):
    """Orchestra [0]: FedAvg plus a federated clustering of the projections. The server fits the global centroids
    to the uploaded local ones by ``server_steps`` SGD steps (500 in the paper) at ``server_lr`` 0.01,
    ``server_momentum`` 0.9 and ``server_weight_decay`` 1e-4: the released code's values and this code's defaults
    (the model's centroid and memory sizes are the ``orchestra`` method's). FL only.
    """

    server_steps: Annotated[int, Range(0, 100_000)] = 500
    server_lr: Annotated[float, Range(0.0, low_open=True)] = 0.01
    server_momentum: Annotated[float, Range(0.0, 1.0, high_open=True)] = 0.9
    server_weight_decay: Annotated[float, Range(0.0)] = 1e-4


SPEC = StrategySpec("orchestra", OrchestraConfig, "federation.strategies.orchestra:OrchestraStrategy", ("fl",))

"""FedU's options (``strategies.<entry>`` of ``name: fedu``), declared once.

References:
    [0] FedU, 2021, https://arxiv.org/abs/2108.06492
    [1] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from dssl.config.ranges import Range
from dssl.config.strategies import StrategySpec
from dssl.config.strategies._divergence import DivergenceConfig


@dataclass(frozen=True)
class FedUConfig(DivergenceConfig):
    """FedU [0] (divergence-aware predictor update), as paper B [1] runs it: the predictor is taken from the
    global model only when the divergence is below ``threshold`` (0.4, the released code's value and this code's
    default). ``divergence_of``: ``encoder`` (default, as the paper and the code measure it) or ``predictor``
    (the flattened norm over the predictor's parameters; needs ``divergence: paper_flat``).

    Paper B's setting: 5 clients, BYOL on a CIFAR ResNet-18, target EMA 0.99, clients weighted by data size
    (this code's default ``aggregation: uniform`` differs). FL only: the divergence is to a server's model.
    """

    threshold: Annotated[float, Range(0.0)] = 0.4
    divergence_of: Literal["encoder", "predictor"] = "encoder"


SPEC = StrategySpec("fedu", FedUConfig, "federation.strategies.fedu:FedU", ("fl",))

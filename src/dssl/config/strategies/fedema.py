"""FedEMA's options (``strategies.<entry>`` of ``name: fedema``), declared once.

References:
    [0] FedEMA, 2022, https://arxiv.org/abs/2204.04385
    [1] FedU, 2021, https://arxiv.org/abs/2108.06492
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from dssl.config.ranges import Range
from dssl.config.strategies import StrategySpec
from dssl.config.strategies._divergence import DivergenceConfig


@dataclass(frozen=True)
class FedEMAConfig(DivergenceConfig):
    """FedEMA [0]: a returning client blends its online encoder and predictor with the global ones,
    mu = min(lambda * ||W_g - W_k||, 1).

    ``scaler``: ``auto`` (default, paper B's autoscaler: lambda_k = ``tau`` / the divergence after client k's
    first participation; tau 0.7 in the paper, 0.8 the released code's default) or ``constant`` (``ema_lambda``
    for every client, 0.8 in the paper). ``skipped``: what a client that did not train in the previous round
    starts from: ``restart`` (default, the released code under client selection) the global model, ``blend`` the
    model it kept however old. Paper B's setting: 5 clients, BYOL on a CIFAR ResNet-18, clients weighted by data
    size (this code's default ``aggregation: uniform`` differs). FedU [1] is its predictor-only ancestor. FL only.
    """

    scaler: Literal["auto", "constant"] = "auto"
    tau: Annotated[float, Range(0.0, 1.0, low_open=True)] = 0.7
    ema_lambda: Annotated[float, Range(0.0)] = 0.8
    skipped: Literal["restart", "blend"] = "restart"


SPEC = StrategySpec("fedema", FedEMAConfig, "federation.strategies.fedema:FedEMA", ("fl",))

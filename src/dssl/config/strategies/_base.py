"""The options every federation strategy shares (``aggregation``) and FedAvg's round adds (``keep_local``).

References:
    [0] FedAvg, 2016, https://arxiv.org/abs/1602.05629
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
    [2] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dssl.specs import Options


@dataclass(frozen=True)
class AggregationConfig(Options):
    """How clients are weighted when their models are averaged (FL's server, DecL's final average).

    ``aggregation``: ``uniform`` (default) is paper A's [1] Algorithm 1, the paper's definition; ``data_size``
    (n_k / n) is FedAvg's [0], paper A's released code's and paper B's [2].
    """

    aggregation: Literal["uniform", "data_size"] = "uniform"


@dataclass(frozen=True)
class StrategyConfig(AggregationConfig):
    """The options of a strategy whose round is FedAvg's: ``keep_local`` (false by default, as paper A's [1] code
    averages every tensor) keeps the method's local state (SimSiam's predictor, BYOL's target) on the client,
    neither uploaded nor replaced: paper B's [2] "keep local knowledge" design choice."""

    keep_local: bool = False

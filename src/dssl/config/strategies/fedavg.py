"""FedAvg's options (``strategies.<entry>`` of ``name: fedavg``), declared once.

References:
    [0] FedAvg, 2016, https://arxiv.org/abs/1602.05629
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

from dataclasses import dataclass

from dssl.config.strategies import StrategySpec
from dssl.config.strategies._base import StrategyConfig


@dataclass(frozen=True)
class FedAvgConfig(StrategyConfig):
    """FedAvg [0], paper A's [1] FL and DecL baseline: the shared options only.

    FedAvg weights each client by its share of the samples and sweeps its sizes (on MNIST: client fraction C in
    {0, 0.1, 0.2, 0.5, 1}, local epochs E in {1, 5, 20}, batch B in {10, 50, all}); paper A's FL study: 100
    clients, 5 per round, E = 2, 100 rounds. This code's default ``aggregation: uniform`` is paper A's Algorithm 1
    (``data_size`` is FedAvg's weighting).
    """


SPEC = StrategySpec("fedavg", FedAvgConfig, "federation.strategies.fedavg:FedAvg")

"""FedAvg: paper A's FL and DecL baseline.

McMahan et al., "Communication-Efficient Learning of Deep Networks from Decentralized Data"
(AISTATS 2017) [0]. Each selected client starts from the global model, trains E local epochs on the
method's own SSL loss and sends its weights; the server averages them (paper A, Algorithm 1 without
the MAR term). In DecL the same client update is followed by neighbour averaging with the mixing
matrix (paper A, Algorithm 2 without the MAR term). Every hook is the ``Strategy`` default.

FedAvg [0] weights each client by its share of the samples, n_k / n, and sweeps its sizes rather than fixing
them (on MNIST: client fraction C in {0, 0.1, 0.2, 0.5, 1}, local epochs E in {1, 5, 20}, batch B in {10, 50, all}).
Paper A's [1] FL study: 100 clients, 5 per round (C = 0.05), E = 2, 100 rounds. This code's default
``aggregation: uniform`` differs from FedAvg's weights: it is paper A's Algorithm 1 (``data_size`` is FedAvg's).

References:
    [0] FedAvg, 2016, https://arxiv.org/abs/1602.05629
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

from dssl.federation.strategies.base import Strategy


class FedAvg(Strategy):
    """FedAvg [0]: replace the whole model by the global one, train, upload everything shared, average (paper
    A's [1] FL and DecL baseline). Its config, ``FedAvgConfig``, holds the shared options only."""

"""FedAvg: paper A's FL and DecL baseline.

McMahan et al., "Communication-Efficient Learning of Deep Networks from Decentralized Data"
(AISTATS 2017). Each selected client starts from the global model, trains E local epochs on the
method's own SSL loss and sends its weights; the server averages them (paper A, Algorithm 1 without
the MAR term). In DecL the same client update is followed by neighbour averaging with the mixing
matrix (paper A, Algorithm 2 without the MAR term). Every hook is the ``Strategy`` default.
"""

from __future__ import annotations

from dssl.federation.strategies.base import Strategy, register_strategy


@register_strategy("fedavg")
class FedAvg(Strategy):
    """Replace the whole model by the global one, train, upload everything shared, average."""

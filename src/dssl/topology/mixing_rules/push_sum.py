"""``push_sum``: p_ij = 1 / |out_j| for every i in j's closed out-neighbourhood. Column-stochastic, so it is
declared ``column_stochastic`` and run with push-sum weights.

References:
    [2] Kempe, Dobra & Gehrke, "Gossip-Based Computation of Aggregate Information", FOCS 2003
    [3] Nedic & Olshevsky, "Distributed Optimization over Time-Varying Directed Graphs", IEEE TAC 2015
"""

from __future__ import annotations

import numpy as np

from dssl.topology.mixing import closed_neighbourhood, register_mixing


@register_mixing("push_sum", column_stochastic=True)
def push_sum(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    """Push-sum's column-stochastic matrix [2, 3]: each sender splits its mass over itself and its out-neighbours."""
    out = closed_neighbourhood(adjacency)  # out[j, i]: j sends to i (itself included)
    return (out / out.sum(axis=1)[:, None]).T

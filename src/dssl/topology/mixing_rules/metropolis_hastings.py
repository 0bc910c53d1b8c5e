"""``metropolis_hastings``: w_ij = 1 / (1 + max(d_i, d_j)) off the diagonal, the rest on the diagonal.

References:
    [1] Xiao, Boyd & Lall, "A Scheme for Robust Distributed Sensor Fusion Based on Average Consensus", IPSN 2005
"""

from __future__ import annotations

import numpy as np

from dssl.topology.mixing import register_mixing


@register_mixing("metropolis_hastings")
def metropolis_hastings(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    """Metropolis weights [1]: doubly stochastic on any undirected graph, from the degrees of a node and its
    neighbours alone (no global knowledge)."""
    degrees = adjacency.sum(axis=1)
    weights = adjacency / (1.0 + np.maximum(degrees[:, None], degrees[None, :]))
    np.fill_diagonal(weights, 1.0 - weights.sum(axis=1))
    return weights

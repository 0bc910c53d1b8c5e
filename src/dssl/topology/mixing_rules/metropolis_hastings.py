"""The ``metropolis_hastings`` rule: w_ij = 1 / (1 + max(d_i, d_j)) off the diagonal, the rest on the diagonal
(its spec, with the reference: ``dssl.config.mixing.metropolis_hastings``)."""

from __future__ import annotations

import numpy as np


def metropolis_hastings(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    """Xiao, Boyd & Lall's Metropolis weights: doubly stochastic on any undirected graph, from the degrees of a
    node and its neighbours alone (no global knowledge)."""
    degrees = adjacency.sum(axis=1)
    weights = adjacency / (1.0 + np.maximum(degrees[:, None], degrees[None, :]))
    np.fill_diagonal(weights, 1.0 - weights.sum(axis=1))
    return weights

"""The ``push_sum`` rule: p_ij = 1 / |out_j| for every i in j's closed out-neighbourhood, column-stochastic and
run with push-sum weights (its spec, with the references: ``dssl.config.mixing.push_sum``)."""

from __future__ import annotations

import numpy as np

from dssl.topology.mixing import closed_neighbourhood


def push_sum(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    """Push-sum's column-stochastic matrix (Kempe et al.; Nedic & Olshevsky): each sender splits its mass over
    itself and its out-neighbours."""
    out = closed_neighbourhood(adjacency)  # out[j, i]: j sends to i (itself included)
    return (out / out.sum(axis=1)[:, None]).T

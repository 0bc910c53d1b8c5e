"""The ``degree_normalised`` rule: w_ij proportional to 1/|A_j| over the closed neighbourhood of i (its spec,
with the reference: ``dssl.config.mixing.degree_normalised``)."""

from __future__ import annotations

import numpy as np

from dssl.topology.mixing import closed_neighbourhood, row_normalise


def degree_normalised(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    closed = closed_neighbourhood(adjacency)
    return row_normalise(closed / closed.sum(axis=1)[None, :])

"""The ``uniform`` rule: 1/|A_i| over the closed neighbourhood, paper A's Algorithm 2 (its spec, with the
reference: ``dssl.config.mixing.uniform``)."""

from __future__ import annotations

import numpy as np

from dssl.topology.mixing import uniform_weights


def uniform(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    """Paper A's weights; the computation is shared with the distance every rule is measured by."""
    return uniform_weights(adjacency)

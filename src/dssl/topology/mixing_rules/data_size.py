"""The ``data_size`` rule: neighbours weighted by their number of samples, as paper A's released code mixes
(its spec, with the reference: ``dssl.config.mixing.data_size``)."""

from __future__ import annotations

import numpy as np

from dssl.topology.mixing import closed_neighbourhood, row_normalise


def data_size(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    if sizes is None:
        raise ValueError("the 'data_size' mixing rule needs the clients' sample counts")
    sizes = np.asarray(sizes, dtype=float)
    if len(sizes) != len(adjacency) or (sizes <= 0).any():
        raise ValueError(f"data_size mixing needs {len(adjacency)} positive client sizes, got {sizes.tolist()}")
    return row_normalise(closed_neighbourhood(adjacency) * sizes[None, :])

"""Small graphs for the linear-theory tests."""

from __future__ import annotations

import numpy as np


def path_graph(n: int) -> np.ndarray:
    adjacency = np.zeros((n, n), dtype=bool)
    for i in range(n - 1):
        adjacency[i, i + 1] = adjacency[i + 1, i] = True
    return adjacency


def cycle_graph(n: int) -> np.ndarray:
    adjacency = path_graph(n)
    adjacency[0, n - 1] = adjacency[n - 1, 0] = True
    return adjacency


def complete_graph(n: int) -> np.ndarray:
    return ~np.eye(n, dtype=bool)

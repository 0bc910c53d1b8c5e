"""Mixing (consensus) matrices for decentralized averaging: client i's new model = sum_j W_ij x_j.

Rules (registry ``MIXING``, keyed by the names used in params.yaml; paper A's [0] Table 6 compares them):
- ``uniform``: 1/|A_i| over the closed neighbourhood -- paper A's Algorithm 2.
- ``data_size``: neighbours weighted by their number of samples -- paper A's released code.
- ``degree_normalised``: w_ij proportional to 1/|A_j| over the closed neighbourhood of i.
- ``metropolis_hastings``: w_ij = 1 / (1 + max(d_i, d_j)) off the diagonal, the rest on the
  diagonal (Xiao, Boyd & Lall's Metropolis weights [1]); symmetric and doubly stochastic, so plain averaging
  converges to the exact mean.
- ``push_sum``: p_ij = 1 / |out_j| for every i in j's closed out-neighbourhood (j splits its mass
  equally among itself and the clients it sends to). Column-stochastic, not row-stochastic: it is
  run with push-sum weights (Kempe et al., FOCS 2003 [2]; for optimisation Nedic & Olshevsky [3] and
  Assran et al., "Stochastic Gradient Push", ICML 2019 [4]), which correct the bias of directed or
  unbalanced graphs (``COLUMN_STOCHASTIC``).
Every other matrix is row-stochastic. The graphs of this project are undirected (symmetric
adjacency); ``push_sum`` also takes a directed one, reading ``adjacency[j, i]`` as "j sends to i".
No rule has a size to set; the default rule is paper A's ``uniform`` (its released code mixes by ``data_size``).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Algorithm 2, Table 6)
    [1] Xiao, Boyd & Lall, "A Scheme for Robust Distributed Sensor Fusion Based on Average Consensus", IPSN 2005
    [2] Kempe, Dobra & Gehrke, "Gossip-Based Computation of Aggregate Information", FOCS 2003
    [3] Nedic & Olshevsky, "Distributed Optimization over Time-Varying Directed Graphs", IEEE TAC 2015
    [4] Assran, Loizou, Ballas & Rabbat, "Stochastic Gradient Push for Distributed Deep Learning", ICML 2019
"""

from __future__ import annotations

from typing import Callable

import numpy as np


def _closed(adjacency: np.ndarray) -> np.ndarray:
    return adjacency | np.eye(len(adjacency), dtype=bool)


def _row_normalise(weights: np.ndarray) -> np.ndarray:
    return weights / weights.sum(axis=1, keepdims=True)


def uniform(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    return _row_normalise(_closed(adjacency).astype(float))


def data_size(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    if sizes is None:
        raise ValueError("the 'data_size' mixing rule needs the clients' sample counts")
    sizes = np.asarray(sizes, dtype=float)
    if len(sizes) != len(adjacency) or (sizes <= 0).any():
        raise ValueError(f"data_size mixing needs {len(adjacency)} positive client sizes, got {sizes.tolist()}")
    return _row_normalise(_closed(adjacency) * sizes[None, :])


def degree_normalised(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    closed = _closed(adjacency)
    return _row_normalise(closed / closed.sum(axis=1)[None, :])


def metropolis_hastings(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    """Metropolis weights [1]: doubly stochastic on any undirected graph, from the degrees of a node and its
    neighbours alone (no global knowledge)."""
    degrees = adjacency.sum(axis=1)
    weights = adjacency / (1.0 + np.maximum(degrees[:, None], degrees[None, :]))
    np.fill_diagonal(weights, 1.0 - weights.sum(axis=1))
    return weights


def push_sum(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    """Push-sum's column-stochastic matrix [2, 3]: each sender splits its mass over itself and its out-neighbours."""
    out = _closed(adjacency)  # out[j, i]: j sends to i (itself included)
    return (out / out.sum(axis=1)[:, None]).T


MIXING: dict[str, Callable[[np.ndarray, np.ndarray | None], np.ndarray]] = {
    "uniform": uniform,
    "data_size": data_size,
    "degree_normalised": degree_normalised,
    "metropolis_hastings": metropolis_hastings,
    "push_sum": push_sum,
}
DEFAULT_RULE = "uniform"  # paper A's Algorithm 2
# When a DecL round mixes: before local training (paper A's Alg. 2, line 10) or after (its code).
ORDERS = ("mix_then_train", "train_then_mix")
# Rules whose matrix is column-stochastic and must be run with push-sum weights.
COLUMN_STOCHASTIC = frozenset({"push_sum"})


def distance_to_uniform(matrix: np.ndarray, adjacency: np.ndarray) -> float:
    """max_ij |W_ij - U_ij|: how far a rule's mixing matrix is from paper A's uniform 1/|A_i| on the same
    graph (0 on a regular graph for every rule but data-size weights; the largest weight a client gives
    differently is what can separate two rules in paper A's Table 6)."""
    return float(np.abs(np.asarray(matrix, dtype=np.float64) - uniform(np.asarray(adjacency, dtype=bool))).max())


def mixing_matrix(adjacency: np.ndarray, rule: str, sizes: np.ndarray | None = None) -> np.ndarray:
    """The mixing matrix of ``rule`` for a graph (no self loops in ``adjacency``): row-stochastic,
    or column-stochastic for the rules in ``COLUMN_STOCHASTIC``."""
    if rule not in MIXING:
        raise KeyError(f"unknown mixing rule {rule!r}; known: {sorted(MIXING)}")
    return MIXING[rule](np.asarray(adjacency, dtype=bool), sizes)

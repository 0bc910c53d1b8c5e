"""Mixing (consensus) matrices for decentralized averaging: client i's new model = sum_j W_ij x_j.

The rules are declared once, one torch-free spec each, in ``dssl.config.mixing`` (registry ``MIXING_SPECS``, keyed
by the names used in params.yaml; each spec module documents its rule and cites its reference, paper A's [0]
Table 6 compares them), and implemented one module each in ``dssl.topology.mixing_rules``, imported when the rule
is used. Every matrix is row-stochastic but those of the rules whose spec is ``column_stochastic`` (``push_sum``),
run with push-sum weights. This module holds what the rules share: the closed neighbourhood, row normalisation,
paper A's uniform weights (the reference every rule's distance is measured from), the default rule (paper A's
``uniform``, Algorithm 2) and the round orders.

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Algorithm 2, Table 6)
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from dssl.config.mixing import MIXING_SPECS

MixingRule = Callable[[np.ndarray, "np.ndarray | None"], np.ndarray]   # (adjacency, sizes) -> matrix
DEFAULT_RULE = "uniform"  # paper A's Algorithm 2
# When a DecL round mixes: before local training (paper A's Alg. 2, line 10) or after (its code).
ORDERS = ("mix_then_train", "train_then_mix")


def closed_neighbourhood(adjacency: np.ndarray) -> np.ndarray:
    """A_i with i itself: the adjacency with its diagonal set."""
    return adjacency | np.eye(len(adjacency), dtype=bool)


def row_normalise(weights: np.ndarray) -> np.ndarray:
    return weights / weights.sum(axis=1, keepdims=True)


def uniform_weights(adjacency: np.ndarray) -> np.ndarray:
    """Paper A's 1/|A_i| over the closed neighbourhood: the ``uniform`` rule, and the reference every rule's
    distance is measured from (so it is shared machinery, not the rule's module alone)."""
    return row_normalise(closed_neighbourhood(adjacency).astype(float))


def distance_to_uniform(matrix: np.ndarray, adjacency: np.ndarray) -> float:
    """max_ij |W_ij - U_ij|: how far a rule's mixing matrix is from paper A's uniform 1/|A_i| on the same
    graph (0 on a regular graph for every rule but data-size weights; the largest weight a client gives
    differently is what can separate two rules in paper A's Table 6)."""
    uniform = uniform_weights(np.asarray(adjacency, dtype=bool))
    return float(np.abs(np.asarray(matrix, dtype=np.float64) - uniform).max())


def mixing_matrix(adjacency: np.ndarray, rule: str, sizes: np.ndarray | None = None) -> np.ndarray:
    """The mixing matrix of ``rule`` for a graph (no self loops in ``adjacency``): row-stochastic,
    or column-stochastic for the rules whose spec says so (``MIXING_SPECS[rule].column_stochastic``). An unknown
    rule raises ``UnknownNameError`` (a ``KeyError``) naming the known ones."""
    return MIXING_SPECS[rule].load()(np.asarray(adjacency, dtype=bool), sizes)

"""Mixing (consensus) matrices for decentralized averaging: client i's new model = sum_j W_ij x_j.

Rules (registry ``MIXING``, keyed by the names used in params.yaml; paper A's [0] Table 6 compares them), one
module each in ``dssl.topology.mixing_rules``, declared ``@register_mixing("<name>")`` and imported when used:
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
  unbalanced graphs (``COLUMN_STOCHASTIC``: the rules declared ``column_stochastic=True``).
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

from dssl.registry import Registry, entry_options

MixingRule = Callable[[np.ndarray, "np.ndarray | None"], np.ndarray]
MIXING: Registry[MixingRule] = Registry.lazy("mixing")
DEFAULT_RULE = "uniform"  # paper A's Algorithm 2
# When a DecL round mixes: before local training (paper A's Alg. 2, line 10) or after (its code).
ORDERS = ("mix_then_train", "train_then_mix")
# Rules whose matrix is column-stochastic and must be run with push-sum weights (read from the declarations).
COLUMN_STOCHASTIC = frozenset(name for name, options in entry_options("mixing").items()
                              if options.get("column_stochastic"))


def register_mixing(name: str, column_stochastic: bool = False) -> Callable[[MixingRule], MixingRule]:
    """Decorator: a rule ``(adjacency, sizes) -> matrix`` under ``name``. ``column_stochastic`` (a literal:
    ``COLUMN_STOCHASTIC`` reads it from the source) marks a rule that runs with push-sum weights."""
    def register(rule: MixingRule) -> MixingRule:
        rule.column_stochastic = column_stochastic
        return MIXING.register(name)(rule)

    return register


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
    or column-stochastic for the rules in ``COLUMN_STOCHASTIC``. An unknown rule raises ``UnknownNameError``
    (a ``KeyError``) naming the known ones."""
    return MIXING[rule](np.asarray(adjacency, dtype=bool), sizes)

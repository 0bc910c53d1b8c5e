"""Greedy topology improvement: add a budget of k edges to a communication graph.

Paper A (Section 4.3, after Theorem 4.6) suggests raising the average connectivity of a decentralized
network, "identifying under-connected clients and creating additional direct communication links".
:func:`improve_graph` adds k edges one at a time; at each step every candidate non-edge is scored by a
criterion from the registry ``IMPROVE_CRITERIA`` (higher score is better) and the best is added, ties
broken by a seeded Generator (scores within ``TIE_TOLERANCE`` of the best count as ties, so that
eigenvalue noise between machines cannot change the chosen edge):

- ``"sensitivity"``: lower the DecL sensitivity of the linear theory model (Theorem 4.4's s of the
  minimiser of Eq. (1)'s DecL objective); needs a theory model
  (``improvement_study.build_theory_model``);
- ``"algebraic_connectivity"``: raise lambda_2 of the graph Laplacian (exact, batched eigvalsh);
- ``"min_degree"``: raise min_i |A_i|, preferring to join the two least-connected clients;
- ``"random"``: a uniformly random non-edge (baseline).

Speed: candidates are evaluated together (stacked Laplacians / weight vectors and one batched eigen-
decomposition). When a graph has more than ``max_candidates`` non-edges, each step scores a seeded
uniform sample of ``max_candidates`` of them (N = 20 has at most 190, below the default cap 512).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from dssl.theory.objectives import decl_global_weights, validate_adjacency

if TYPE_CHECKING:
    from dssl.theory.solutions import TheoryModel

DEFAULT_MAX_CANDIDATES = 512
# Scores within this (relative to max(1, |best|)) of the best are ties, broken by the seeded RNG.
# Candidates that are equal in exact arithmetic (isomorphic graphs) get eigenvalues that differ by
# ~1e-15, and by different amounts on different CPUs / LAPACK builds; a tolerance far above that
# noise keeps the chosen edge, an integer decision, the same on every machine.
TIE_TOLERANCE = 1e-9


def laplacian(adjacency: np.ndarray) -> np.ndarray:
    """Combinatorial Laplacian D - A of an undirected graph."""
    a = adjacency.astype(float)
    return np.diag(a.sum(axis=1)) - a


def algebraic_connectivity(adjacency: np.ndarray) -> float:
    """lambda_2 of the Laplacian (0 for a disconnected graph)."""
    if len(adjacency) < 2:
        return 0.0
    return float(np.linalg.eigvalsh(laplacian(adjacency))[1])


def closed_sizes(adjacency: np.ndarray) -> np.ndarray:
    """|A_i| = 1 + degree (paper A counts the client itself)."""
    return adjacency.sum(axis=1).astype(np.int64) + 1


def candidate_edges(adjacency: np.ndarray) -> np.ndarray:
    """All non-edges (u, v) with u < v, as an (m, 2) integer array in row-major order."""
    u, v = np.nonzero(np.triu(~adjacency, k=1))
    return np.stack([u, v], axis=1).astype(np.int64)


@dataclass
class ImproveContext:
    """What a criterion may use: the seeded Generator and, for "sensitivity", the theory model."""

    rng: np.random.Generator
    model: TheoryModel | None = None


def _stacked_closed(adjacency: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """(m, N, N) closed neighbourhood matrices, one per candidate edge added."""
    m, n = len(cands), len(adjacency)
    closed = np.repeat((adjacency | np.eye(n, dtype=bool))[None], m, axis=0)
    ar = np.arange(m)
    closed[ar, cands[:, 0], cands[:, 1]] = True
    closed[ar, cands[:, 1], cands[:, 0]] = True
    return closed


def decl_weights_stack(adjacency: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """(m, N) DecL objective weights pi_j = (1/N) sum_{i: j in A_i} 1/|A_i| after adding each candidate."""
    closed = _stacked_closed(adjacency, cands).astype(float)
    inv_sizes = 1.0 / closed.sum(axis=2)
    return np.einsum("mij,mi->mj", closed, inv_sizes) / adjacency.shape[0]


def score_sensitivity(adjacency: np.ndarray, cands: np.ndarray, ctx: ImproveContext) -> np.ndarray:
    """Minus the DecL sensitivity of the theory model after adding each candidate edge."""
    if ctx.model is None:
        raise ValueError("criterion 'sensitivity' needs a theory model "
                         "(model=, from improvement_study.build_theory_model)")
    return -ctx.model.batched_sensitivity(decl_weights_stack(adjacency, cands))


def score_algebraic_connectivity(adjacency: np.ndarray, cands: np.ndarray, ctx: ImproveContext) -> np.ndarray:
    """lambda_2 of the Laplacian after adding each candidate edge (rank-one updates, batched)."""
    m = len(cands)
    lap = np.repeat(laplacian(adjacency)[None], m, axis=0)
    ar, u, v = np.arange(m), cands[:, 0], cands[:, 1]
    lap[ar, u, u] += 1.0
    lap[ar, v, v] += 1.0
    lap[ar, u, v] -= 1.0
    lap[ar, v, u] -= 1.0
    return np.linalg.eigvalsh(lap)[:, 1]


def score_min_degree(adjacency: np.ndarray, cands: np.ndarray, ctx: ImproveContext) -> np.ndarray:
    """min_i |A_i| after the edge, then (tie-break) a smaller |A_u| + |A_v| before it."""
    sizes = closed_sizes(adjacency)
    m, n = len(cands), len(adjacency)
    after = np.repeat(sizes[None], m, axis=0)
    ar = np.arange(m)
    after[ar, cands[:, 0]] += 1
    after[ar, cands[:, 1]] += 1
    pair = sizes[cands[:, 0]] + sizes[cands[:, 1]]  # < 2N + 2, so the lexicographic score is exact
    return after.min(axis=1) * (4 * n + 4) - pair


def score_random(adjacency: np.ndarray, cands: np.ndarray, ctx: ImproveContext) -> np.ndarray:
    """Uniform random scores: the added edge is a uniformly random non-edge."""
    return ctx.rng.random(len(cands))


IMPROVE_CRITERIA: dict[str, Callable[[np.ndarray, np.ndarray, ImproveContext], np.ndarray]] = {
    "sensitivity": score_sensitivity,
    "algebraic_connectivity": score_algebraic_connectivity,
    "min_degree": score_min_degree,
    "random": score_random,
}


def _step_metrics(adjacency: np.ndarray, model: TheoryModel | None, eval_model: TheoryModel | None) -> dict:
    sizes = closed_sizes(adjacency)
    metrics = {
        "algebraic_connectivity": algebraic_connectivity(adjacency),
        "min_connectivity": float(sizes.min()),
        "mean_connectivity": float(sizes.mean()),
        "n_edges": int(adjacency.sum() // 2),
        "sensitivity": None,
        "sensitivity_N": None,
    }
    if model is not None:
        metrics.update(model.sensitivities(decl_global_weights(adjacency)))
    if eval_model is not None:
        held = eval_model.sensitivities(decl_global_weights(adjacency))
        metrics.update({f"heldout_{k}": v for k, v in held.items()})
    return metrics


def _choose(scores: np.ndarray, rng: np.random.Generator) -> int:
    """Index of the best score; near-ties (TIE_TOLERANCE) are broken by ``rng``."""
    best = float(np.max(scores))
    ties = np.flatnonzero(scores >= best - TIE_TOLERANCE * max(1.0, abs(best)))
    return int(ties[rng.integers(len(ties))]) if len(ties) > 1 else int(ties[0])


def improve_graph(
    adjacency: np.ndarray,
    k: int,
    criterion: str,
    seed: int,
    *,
    model: TheoryModel | None = None,
    eval_model: TheoryModel | None = None,
    max_candidates: int = DEFAULT_MAX_CANDIDATES,
) -> tuple[np.ndarray, list[dict]]:
    """Add ``k`` edges greedily by ``criterion``; returns (new adjacency, per-step history).

    ``history[0]`` describes the input graph (step 0, edge None); entry t describes the graph after the
    t-th added edge: edge (u, v), algebraic_connectivity, min/mean_connectivity (|A_i| with self),
    n_edges, n_candidates scored, and the DecL sensitivity over the first c (``sensitivity``) and first N
    (``sensitivity_N``) coordinates when a theory ``model`` is given (None otherwise). The "sensitivity"
    criterion minimises the model's own window (the theory cfg's ``improvement.window``, default c).
    Because that criterion optimises the very data draw it is scored on, pass ``eval_model`` (a theory
    model of an independent draw) to also record ``heldout_sensitivity``/``heldout_sensitivity_N``.
    Stops early only when the graph becomes complete. No self loops or duplicate edges are added.
    """
    if criterion not in IMPROVE_CRITERIA:
        raise ValueError(f"unknown criterion {criterion!r}; known: {sorted(IMPROVE_CRITERIA)}")
    if k < 0:
        raise ValueError(f"edge budget k={k} must be >= 0")
    adj = validate_adjacency(adjacency).copy()
    if model is not None and model.n_clients != adj.shape[0]:
        raise ValueError(f"theory model has {model.n_clients} clients but the graph has {adj.shape[0]}")
    ctx = ImproveContext(rng=np.random.default_rng([int(seed), 7]), model=model)
    history = [{"step": 0, "edge": None, "n_candidates": 0, **_step_metrics(adj, model, eval_model)}]
    for step in range(1, k + 1):
        cands = candidate_edges(adj)
        if len(cands) == 0:
            break
        if len(cands) > max_candidates:
            cands = cands[np.sort(ctx.rng.choice(len(cands), size=max_candidates, replace=False))]
        u, v = (int(x) for x in cands[_choose(IMPROVE_CRITERIA[criterion](adj, cands, ctx), ctx.rng)])
        adj[u, v] = adj[v, u] = True
        history.append(
            {"step": step, "edge": (u, v), "n_candidates": len(cands), **_step_metrics(adj, model, eval_model)}
        )
    return adj, history

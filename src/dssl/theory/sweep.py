"""Numerical study of paper A's theory: sensitivity over d, method, framework and graph.

- :func:`run_theory_sweep` -> one row per (d, seed, method, framework, graph) with the sensitivity of
  the closed-form minimiser (Theorem 4.4's s over the first c coordinates, and over the first N);
- :func:`summarise` -> mean and spread over seeds.
Its options are ``dssl.theory.options``; the theorems are checked on its rows by
``dssl.theory.theorems``, and ``dssl.theory.improvement_study`` adds edges to its graphs.

Nothing here is fitted to the paper: the data come from data_model, the matrices from objectives
(derived from the objectives, docs/theory.md), the solutions from solutions.closed_form_solution.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dssl.theory.data_model import generate_dataset, sample_sizes
from dssl.theory.objectives import (
    augmentation_rngs,
    check_assumption_a9,
    client_matrices,
    combine,
    decl_global_weights,
    make_h,
    neighbourhood_weights,
)
from dssl.theory.options import resolve_theory_cfg, validate_graphs
from dssl.theory.parallel import limit_blas, run_tasks, task_cfg
from dssl.theory.sensitivity import representability_from_basis, sensitivity
from dssl.theory.solutions import closed_form_solution

ROW_COLUMNS = [
    "d", "seed", "method", "framework", "graph", "topology", "connectivity", "connectivity_actual",
    "sensitivity", "sensitivity_N", "rank", "relative_gap",
]


def client_matrix_stacks(cfg: dict, d: int, seed: int, methods: list[str] | None = None) -> dict[str, np.ndarray]:
    """{method: (N, d, d)} local matrices X_j of all clients for one (d, seed) draw."""
    methods = list(cfg["methods"] if methods is None else methods)
    sizes = sample_sizes(d, **cfg["sample_sizes"])
    data_opts = dict(cfg["data"])
    tau = float(d ** data_opts.pop("tau_exponent"))
    mu = float(d ** data_opts.pop("mu_exponent"))
    dataset = generate_dataset(d, cfg["N"], seed, sizes, tau=tau, mu=mu, **data_opts)
    h = make_h(cfg["H"])
    modes = {m: cfg["augmentation"].get(m, "expected") for m in methods}
    stacks = {m: np.empty((cfg["N"], d, d)) for m in methods}
    for client in dataset.clients:
        mats = client_matrices(
            client.x, methods, augmentation_rngs(seed, d, client.client), modes=modes,
            p=float(cfg["mask_ratio"]), h=h, n_views=int(cfg["n_views"]), mim_form=cfg["mim_form"],
        )
        for m in methods:
            stacks[m][client.client] = mats[m]
    return stacks


def _solve(m: np.ndarray, c: int, n: int) -> dict[str, float]:
    sol = closed_form_solution(m, c)
    r = representability_from_basis(sol.basis)
    return {
        "sensitivity": sensitivity(r, c),
        "sensitivity_N": sensitivity(r, n),
        "rank": float(sol.rank),
        "relative_gap": sol.relative_gap,
    }


def _mean_solve(matrices, c: int, n: int) -> dict[str, float]:
    results = [_solve(m, c, n) for m in matrices]
    out = {k: float(np.mean([r[k] for r in results])) for k in ("sensitivity", "sensitivity_N", "rank")}
    out["relative_gap"] = float(np.min([r["relative_gap"] for r in results]))
    return out


def _row(d, seed, method, framework, graph, topology, connectivity, actual, values) -> dict:
    return {
        "d": d, "seed": seed, "method": method, "framework": framework, "graph": graph,
        "topology": topology, "connectivity": connectivity, "connectivity_actual": actual, **values,
    }


def _evaluate_method(stack: np.ndarray, cfg: dict, graphs: dict, d: int, seed: int, method: str) -> list[dict]:
    n, c = cfg["N"], cfg["c"]
    rows = []
    frameworks = cfg["frameworks"]
    if "local" in frameworks:
        clients = range(n if cfg["local_clients"] is None else min(n, int(cfg["local_clients"])))
        values = _mean_solve((stack[j] for j in clients), c, n)
        rows.append(_row(d, seed, method, "local", "local", "none", 1.0, 1.0, values))
    if "fl" in frameworks:
        values = _solve(stack.mean(axis=0), c, n)
        rows.append(_row(d, seed, method, "fl", "fl", "complete", float(n), float(n), values))
    # Graphs with the same objective weights share one solve: every regular graph has pi = 1/N, so its
    # DecL objective (Eq. 1) is FL's exactly.
    solved: dict[bytes, dict[str, float]] = {}
    if "fl" in frameworks:
        solved[np.round(np.full(n, 1.0 / n), 12).tobytes()] = rows[-1]
    for name, g in graphs.items():
        args = (d, seed, method)
        tail = (name, g["topology"], g["connectivity"], g["connectivity_actual"])
        if "decl" in frameworks:
            weights = decl_global_weights(g["adjacency"])
            key = np.round(weights, 12).tobytes()
            if key not in solved:
                solved[key] = _solve(combine(stack, weights), c, n)
            values = {k: solved[key][k] for k in ("sensitivity", "sensitivity_N", "rank", "relative_gap")}
            rows.append(_row(*args, "decl", *tail, values))
        if "decl_nbhd" in frameworks:
            omega = neighbourhood_weights(g["adjacency"])
            values = _mean_solve((combine(stack, omega[i]) for i in range(n)), c, n)
            rows.append(_row(*args, "decl_nbhd", *tail, values))
    return rows


def _sweep_task(cfg: dict, graphs: dict, d: int, seed: int) -> list[dict]:
    """All rows of one (d, seed) draw (a process-pool task; cfg and graphs are validated)."""
    with limit_blas(cfg["blas_threads"]):
        stacks = client_matrix_stacks(cfg, d, seed)
        rows: list[dict] = []
        for method in cfg["methods"]:
            rows.extend(_evaluate_method(stacks[method], cfg, graphs, d, seed, method))
    return rows


def run_theory_sweep(cfg: dict, graphs: dict[str, dict]) -> pd.DataFrame:
    """Sensitivity of the closed-form minimiser for every d, seed, method, framework and graph.

    ``graphs`` maps a name to {"adjacency": bool [N, N] without self loops, "topology":
    "uniform"|"general"|"complete", "connectivity": mean |A_i| with self}. Rows (columns
    ``ROW_COLUMNS``): local rows average over clients (graph "local"); FL rows use graph "fl",
    topology "complete", connectivity N; DecL rows (Eq. 1's global objective) one per graph.
    ``sensitivity`` is Theorem 4.4's spread over the first c coordinates, ``sensitivity_N`` over the
    first N, ``rank`` the row-space dimension, ``relative_gap`` (lambda_c - lambda_{c+1}) / lambda_1.
    ``n_jobs``/``blas_threads`` change the wall time only (up to BLAS rounding across thread counts).
    """
    cfg = resolve_theory_cfg(cfg)
    graphs = validate_graphs(graphs, cfg["N"])
    if "cl_h" in cfg["methods"]:
        for d in cfg["d_values"]:
            check_assumption_a9(make_h(cfg["H"]), d, cfg["c"])
    tasks_cfg = task_cfg(cfg)
    tasks = [(tasks_cfg, graphs, d, seed) for d in cfg["d_values"] for seed in cfg["seeds"]]
    results = run_tasks(_sweep_task, tasks, cfg["n_jobs"], [float(t[2]) ** 3 for t in tasks])
    rows = [row for task_rows in results for row in task_rows]
    df = pd.DataFrame(rows, columns=ROW_COLUMNS)
    df.attrs["theory_cfg"] = cfg
    return df


GROUP_COLUMNS = ["d", "method", "framework", "graph", "topology", "connectivity"]


def summarise(df: pd.DataFrame, value: str = "sensitivity") -> pd.DataFrame:
    """Mean, standard deviation, min, max and seed count of ``value`` per (d, method, framework, graph)."""
    grouped = df.groupby(GROUP_COLUMNS, sort=True)[value]
    out = grouped.agg(mean="mean", std="std", min="min", max="max", n_seeds="count").reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out

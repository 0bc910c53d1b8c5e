"""Numerical study of paper A's theory: sensitivity over d, method, framework and graph.

Entry points for the pipeline stage:
- :func:`run_theory_sweep` -> one row per (d, seed, method, framework, graph) with the sensitivity of
  the closed-form minimiser (Theorem 4.4's s over the first c coordinates, and over the first N);
- :func:`summarise` -> mean and spread over seeds;
- :func:`claim_checks` -> Theorem 4.4, Corollary 4.5 and Theorem 4.6 checked at every d;
- :func:`run_improvement_study` -> sensitivity after greedily adding edges (dssl.theory.improve).

Nothing here is fitted to the paper: the data come from data_model, the matrices from objectives
(derived from the objectives, docs/theory.md), the solutions from solutions.closed_form_solution.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dssl.theory.data_model import generate_dataset, sample_sizes
from dssl.theory.objectives import (
    AUG_MODES,
    FRAMEWORKS,
    METHODS,
    MIM_FORMS,
    augmentation_rngs,
    check_assumption_a9,
    client_matrices,
    combine,
    decl_global_weights,
    make_h,
    neighbourhood_weights,
    validate_adjacency,
)
from dssl.theory.sensitivity import representability_from_basis, sensitivity
from dssl.theory.solutions import TheoryModel, closed_form_solution

if TYPE_CHECKING:
    from dssl.config.checker import Checker

# "decl_nbhd" (opt-in): mean over clients of the minimiser of client i's neighbourhood objective
# (1/|A_i|) sum_{j in A_i} L_j -- the per-client models before DecL's final averaging (Eq. 26's X_i-bar).
EXTRA_FRAMEWORKS = ("decl_nbhd",)
TOPOLOGY_NAMES = ("uniform", "general", "complete")
IMPROVE_DEFAULT_CRITERIA = ("sensitivity", "algebraic_connectivity", "min_degree", "random")
HELDOUT_SEED_OFFSET = 100_000  # data seed of the independent draw that scores improved graphs

DEFAULT_THEORY_CFG: dict[str, Any] = {
    "N": 20,
    "c": 40,
    "d_values": [64, 128, 256, 512, 1024],
    "seeds": [0, 1, 2],
    "methods": list(METHODS),
    "frameworks": list(FRAMEWORKS),
    "sample_sizes": {"n_frequent_factor": 1.0, "beta": 1.0, "n_rare_factor": 1.0, "alpha": 0.5},
    "data": {
        "tau_exponent": 0.2,
        "mu_exponent": -0.2,
        "q_mode": "sample",
        "rare_assignment": "random",
        "rare_mode": "basis",
    },
    "mask_ratio": 0.75,
    # Paper-faithful: Eqs. (43)/(55) keep one sampled xi per sample for CL, Eq. (17) averages MIM
    # over masks.
    "augmentation": {"cl": "sampled", "cl_h": "sampled", "mim": "expected"},
    "n_views": 1,
    "mim_form": "derived",
    "H": {"kind": "blend", "weight": 0.5, "shift": 1},
    # Clients are exchangeable in the data model, so the local mean over the first 5 clients (x 3 seeds)
    # estimates the mean over all 20 at a quarter of the eigen-decompositions; None = all clients.
    "local_clients": 5,
    # Parallelism only changes wall time, not the numbers: (d, seed) tasks run in n_jobs spawned
    # processes, each limited to blas_threads BLAS threads (None: the BLAS default). One thread per
    # process: multi-threaded OpenBLAS eigen-solvers slow down several-fold on a shared 2-core machine.
    "n_jobs": 2,
    "blas_threads": 1,
    "improvement": {
        "d": 128,
        "k": 5,
        "seeds": None,
        "criteria": list(IMPROVE_DEFAULT_CRITERIA),
        "graphs": None,
        "max_start_connectivity": 3.0,
        "method": "cl",
        "window": "c",
        "max_candidates": 256,
    },
}

ROW_COLUMNS = [
    "d", "seed", "method", "framework", "graph", "topology", "connectivity", "connectivity_actual",
    "sensitivity", "sensitivity_N", "rank", "relative_gap",
]


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------
def _merge(defaults: dict, override: dict, path: str) -> dict:
    out = copy.deepcopy(defaults)
    for key, value in (override or {}).items():
        if key not in defaults:
            raise ValueError(f"unknown theory cfg key '{path}{key}'; known: {sorted(defaults)}")
        if isinstance(defaults[key], dict) and key != "H" and isinstance(value, dict):
            out[key] = _merge(defaults[key], value, f"{path}{key}.")
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve_theory_cfg(cfg: dict | None) -> dict:
    """Defaults merged with ``cfg`` and validated; every problem is a ValueError naming the key."""
    out = _merge(DEFAULT_THEORY_CFG, cfg or {}, "")
    n, c = int(out["N"]), int(out["c"])
    if n < 2:
        raise ValueError(f"N={n}: the data model needs at least 2 clients")
    if c < 2 * n:
        raise ValueError(f"c={c} must be >= 2N={2 * n} (paper A, Section 3.2: c >= 2N)")
    d_values = [int(d) for d in out["d_values"]]
    if not d_values or sorted(set(d_values)) != d_values:
        raise ValueError(f"d_values must be a non-empty increasing list, got {out['d_values']}")
    if d_values[0] < c:
        raise ValueError(f"d_values[0]={d_values[0]} must be >= c={c} (W in R^(c x d), c <= d)")
    out["d_values"], out["N"], out["c"] = d_values, n, c
    out["seeds"] = [int(s) for s in out["seeds"]]
    if not out["seeds"]:
        raise ValueError("seeds must not be empty")
    for method in out["methods"]:
        if method not in METHODS:
            raise ValueError(f"methods: unknown {method!r}; known: {METHODS}")
    for framework in out["frameworks"]:
        if framework not in FRAMEWORKS + EXTRA_FRAMEWORKS:
            raise ValueError(f"frameworks: unknown {framework!r}; known: {FRAMEWORKS + EXTRA_FRAMEWORKS}")
    for method, mode in out["augmentation"].items():
        if mode not in AUG_MODES:
            raise ValueError(f"augmentation.{method}: unknown mode {mode!r}; known: {AUG_MODES}")
    if out["mim_form"] not in MIM_FORMS:
        raise ValueError(f"mim_form: unknown {out['mim_form']!r}; known: {MIM_FORMS}")
    if not 0.0 < float(out["mask_ratio"]) < 1.0:
        raise ValueError(f"mask_ratio={out['mask_ratio']} must lie in (0, 1)")
    if int(out["n_views"]) < 1:
        raise ValueError(f"n_views={out['n_views']} must be >= 1")
    make_h(out["H"])
    imp = out["improvement"]
    if imp["method"] not in METHODS:
        raise ValueError(f"improvement.method: unknown {imp['method']!r}; known: {METHODS}")
    if int(imp["d"]) < c:
        raise ValueError(f"improvement.d={imp['d']} must be >= c={c}")
    if imp["window"] not in ("c", "N"):
        raise ValueError(f"improvement.window: {imp['window']!r} must be 'c' or 'N'")
    if int(out["n_jobs"]) < 1:
        raise ValueError(f"n_jobs={out['n_jobs']} must be >= 1")
    return out


def _validate_graphs(graphs: dict[str, dict], n_clients: int) -> dict[str, dict]:
    checked = {}
    for name, spec in (graphs or {}).items():
        for key in ("adjacency", "topology", "connectivity"):
            if key not in spec:
                raise ValueError(f"graph {name!r} lacks key {key!r} (needs adjacency, topology, connectivity)")
        adjacency = validate_adjacency(spec["adjacency"], f"graph {name!r} adjacency")
        if adjacency.shape[0] != n_clients:
            raise ValueError(
                f"graph {name!r} has {adjacency.shape[0]} clients but cfg N = {n_clients}; "
                "build the graphs with the theory cfg's N"
            )
        if spec["topology"] not in TOPOLOGY_NAMES:
            raise ValueError(f"graph {name!r}: unknown topology {spec['topology']!r}; known: {TOPOLOGY_NAMES}")
        checked[name] = {
            "adjacency": adjacency,
            "topology": spec["topology"],
            "connectivity": float(spec["connectivity"]),
            "connectivity_actual": float(adjacency.sum(axis=1).mean() + 1.0),
        }
    return checked


# --------------------------------------------------------------------------------------------------
# Matrices and evaluation
# --------------------------------------------------------------------------------------------------
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


def _limit_blas(threads: int | None):
    """A context limiting BLAS threads (threadpoolctl, a scikit-learn dependency), or a no-op."""
    import contextlib

    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=int(threads), user_api="blas")


def _sweep_task(cfg: dict, graphs: dict, d: int, seed: int) -> list[dict]:
    """All rows of one (d, seed) draw (a process-pool task; cfg and graphs are validated)."""
    with _limit_blas(cfg["blas_threads"]):
        stacks = client_matrix_stacks(cfg, d, seed)
        rows: list[dict] = []
        for method in cfg["methods"]:
            rows.extend(_evaluate_method(stacks[method], cfg, graphs, d, seed, method))
    return rows


def _task_cfg(cfg: dict) -> dict:
    """cfg for worker tasks: with n_jobs > 1, one BLAS thread per process unless blas_threads is set."""
    if int(cfg["n_jobs"]) > 1 and cfg["blas_threads"] is None:
        return {**cfg, "blas_threads": 1}  # n_jobs processes must not oversubscribe the cores
    return cfg


def _run_tasks(fn, tasks: list[tuple], n_jobs: int, costs: list[float]) -> list:
    """[fn(*task) for task in tasks] in task order; in n_jobs spawned processes when n_jobs > 1."""
    n_jobs = min(int(n_jobs), len(tasks))
    if n_jobs <= 1:
        return [fn(*task) for task in tasks]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    order = sorted(range(len(tasks)), key=lambda k: -costs[k])  # most expensive first balances load
    with ProcessPoolExecutor(n_jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {k: pool.submit(fn, *tasks[k]) for k in order}
        return [futures[k].result() for k in range(len(tasks))]


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
    graphs = _validate_graphs(graphs, cfg["N"])
    if "cl_h" in cfg["methods"]:
        for d in cfg["d_values"]:
            check_assumption_a9(make_h(cfg["H"]), d, cfg["c"])
    task_cfg = _task_cfg(cfg)
    tasks = [(task_cfg, graphs, d, seed) for d in cfg["d_values"] for seed in cfg["seeds"]]
    results = _run_tasks(_sweep_task, tasks, cfg["n_jobs"], [float(t[2]) ** 3 for t in tasks])
    rows = [row for task_rows in results for row in task_rows]
    df = pd.DataFrame(rows, columns=ROW_COLUMNS)
    df.attrs["theory_cfg"] = cfg
    return df


# --------------------------------------------------------------------------------------------------
# Summaries and claim checks
# --------------------------------------------------------------------------------------------------
GROUP_COLUMNS = ["d", "method", "framework", "graph", "topology", "connectivity"]


def summarise(df: pd.DataFrame, value: str = "sensitivity") -> pd.DataFrame:
    """Mean, standard deviation, min, max and seed count of ``value`` per (d, method, framework, graph)."""
    grouped = df.groupby(GROUP_COLUMNS, sort=True)[value]
    out = grouped.agg(mean="mean", std="std", min="min", max="max", n_seeds="count").reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out


def _first_d_holding(holds: dict[int, bool]) -> int | None:
    """Smallest d such that the claim holds at d and at every larger d (None if it fails at the top)."""
    first = None
    for d in sorted(holds, reverse=True):
        if not holds[d]:
            break
        first = d
    return first


def _claim(claim: str, sub_id: str, statement: str, holds: dict[int, bool], margin: dict[int, float]) -> dict:
    return {
        "claim": claim,
        "claim_id": f"{claim}[{sub_id}]",
        "value": "",
        "statement": statement,
        "holds_by_d": {int(d): bool(v) for d, v in holds.items()},
        "margin_by_d": {int(d): float(v) for d, v in margin.items()},
        "holds_from_d": _first_d_holding(holds),
        "holds_at_largest_d": bool(holds[max(holds)]) if holds else False,
    }


def _thm44(means: pd.DataFrame, atol: float) -> list[dict]:
    out = []
    for framework in sorted(means["framework"].unique()):
        sub = means[means["framework"] == framework]
        for cl in ("cl", "cl_h"):
            if not {cl, "mim"} <= set(sub["method"]):
                continue
            piv = sub.pivot_table(index=["d", "graph"], columns="method", values="value")
            diff = (piv[cl] - piv["mim"]).groupby(level="d").min()  # must hold on every graph
            holds = {d: v > atol for d, v in diff.items()}
            out.append(_claim(
                "thm4.4", f"{framework},{cl}>mim",
                f"{framework}: s_{cl} > s_mim (every graph), mean over seeds",
                holds, diff.to_dict(),
            ))
    return out


def _cor45(means: pd.DataFrame, atol: float) -> list[dict]:
    out = []
    dec = means[means["framework"].isin(("decl",) + EXTRA_FRAMEWORKS)]
    for (framework, method, topology), sub in dec.groupby(["framework", "method", "topology"], sort=True):
        if topology == "complete" or sub["connectivity"].nunique() < 2:
            continue
        holds, margin = {}, {}
        for d, at_d in sub.groupby("d"):
            curve = at_d.groupby("connectivity")["value"].mean().sort_index()
            steps = np.diff(curve.to_numpy())  # must all be < 0: s strictly falls as |A| grows
            holds[d] = bool(np.all(steps < -atol))
            margin[d] = float(-np.max(steps))
        out.append(_claim(
            "cor4.5", f"{framework},{method},{topology}",
            f"{framework} {topology}: s_{method} strictly decreases with mean |A_i|, mean over seeds",
            holds, margin,
        ))
    return out


def _thm46(means: pd.DataFrame, atol: float) -> list[dict]:
    out = []
    fl = means[means["framework"] == "fl"].set_index(["d", "method"])["value"]
    dec = means[means["framework"].isin(("decl",) + EXTRA_FRAMEWORKS)]
    for (framework, method, topology), sub in dec.groupby(["framework", "method", "topology"], sort=True):
        holds, margin = {}, {}
        for d, at_d in sub.groupby("d"):
            if (d, method) not in fl.index:
                continue
            gap = float(at_d["value"].min() - fl[(d, method)])
            holds[d] = gap >= -atol
            margin[d] = gap
        if holds:
            out.append(_claim(
                "thm4.6", f"{framework},{method},{topology}",
                f"{framework} {topology}: s_Dec >= s_Fed for {method} on every graph, mean over seeds",
                holds, margin,
            ))
    return out


def claim_checks(
    df: pd.DataFrame, values: tuple[str, ...] = ("sensitivity", "sensitivity_N"), atol: float = 1e-9
) -> list[dict]:
    """Theorem 4.4, Corollary 4.5 and Theorem 4.6 evaluated on the sweep, per d (means over seeds).

    Checked for each column in ``values`` (default: the paper's window k <= c, then k <= N; columns
    missing from ``df`` are skipped). Each dict: claim, claim_id (suffix "@k<=N" for the N window),
    value (the column), statement, holds_by_d {d: bool}, margin_by_d {d: float} (positive = holds with
    that margin), holds_from_d (smallest d from which it holds at every larger d, or None),
    holds_at_largest_d. ``atol`` absorbs floating-point ties (a regular graph's DecL objective equals
    FL's exactly, see docs/theory.md).
    """
    out: list[dict] = []
    for value in values:
        if value not in df.columns:
            continue
        means = df.groupby(GROUP_COLUMNS, sort=True)[value].mean().reset_index().rename(columns={value: "value"})
        for check in _thm44(means, atol) + _cor45(means, atol) + _thm46(means, atol):
            check["value"] = value
            if value != "sensitivity":
                check["claim_id"] += "@k<=N" if value == "sensitivity_N" else f"@{value}"
                check["statement"] += f" [{value}]"
            out.append(check)
    return out


# --------------------------------------------------------------------------------------------------
# Topology improvement study
# --------------------------------------------------------------------------------------------------
def build_theory_model(theory_cfg: dict, n_clients: int | None = None) -> TheoryModel:
    """A :class:`TheoryModel` for one (d, seed, method) from a theory cfg plus keys d, seed, method.

    Unset keys take the sweep defaults; ``theory_cfg["N"]`` (if given) must equal ``n_clients``.
    The model's window is c or N as ``improvement.window`` says.
    """
    extra = {k: theory_cfg[k] for k in ("d", "seed", "method") if k in theory_cfg}
    base = {k: v for k, v in theory_cfg.items() if k not in ("d", "seed", "method")}
    if n_clients is not None:
        if "N" in base and int(base["N"]) != int(n_clients):
            raise ValueError(f"theory cfg N={base['N']} but the graph has {n_clients} clients")
        base["N"] = int(n_clients)
        base.setdefault("c", 2 * int(n_clients))
    d = int(extra.get("d", DEFAULT_THEORY_CFG["improvement"]["d"]))
    base["d_values"] = [d]
    cfg = resolve_theory_cfg(base)
    method = extra.get("method", cfg["improvement"]["method"])
    seed = int(extra.get("seed", cfg["seeds"][0]))
    window = cfg["c"] if cfg["improvement"]["window"] == "c" else cfg["N"]
    with _limit_blas(cfg["blas_threads"]):
        stack = client_matrix_stacks(cfg, d, seed, [method])[method]
    return TheoryModel(client_mats=stack, c=cfg["c"], window=window, method=method, d=d, seed=seed)


def _improvement_starts(cfg: dict, graphs: dict[str, dict]) -> list[str]:
    imp = cfg["improvement"]
    if imp["graphs"] is not None:
        missing = [g for g in imp["graphs"] if g not in graphs]
        if missing:
            raise ValueError(f"improvement.graphs names unknown graphs {missing}; known: {sorted(graphs)}")
        return list(imp["graphs"])
    return [
        name for name, g in graphs.items()
        if g["topology"] != "complete" and g["connectivity"] <= float(imp["max_start_connectivity"])
    ]


def _improvement_task(cfg: dict, graphs: dict, seed: int) -> list[dict]:
    """All improvement rows of one seed: one theory model shared by every start graph and criterion."""
    from dssl.theory.improve import improve_graph

    imp = cfg["improvement"]
    base = {k: v for k, v in cfg.items() if k != "d_values"}
    theory_cfg = {**base, "d": int(imp["d"]), "seed": seed, "method": imp["method"]}
    rows = []
    with _limit_blas(cfg["blas_threads"]):
        model = build_theory_model(theory_cfg, cfg["N"])
        # The "sensitivity" criterion is fitted to this draw; an independent draw scores every graph too.
        heldout = build_theory_model({**theory_cfg, "seed": seed + HELDOUT_SEED_OFFSET}, cfg["N"])
        for name in _improvement_starts(cfg, graphs):
            g = graphs[name]
            for criterion in imp["criteria"]:
                _, history = improve_graph(
                    g["adjacency"], int(imp["k"]), criterion, seed,
                    model=model, eval_model=heldout, max_candidates=int(imp["max_candidates"]),
                )
                for h in history:
                    edge = h["edge"] or (None, None)
                    rows.append({
                        "graph": name, "topology": g["topology"], "connectivity": g["connectivity"],
                        "criterion": criterion, "seed": seed, "step": h["step"],
                        "edge_u": edge[0], "edge_v": edge[1],
                        "sensitivity": h["sensitivity"], "sensitivity_N": h["sensitivity_N"],
                        "heldout_sensitivity": h["heldout_sensitivity"],
                        "heldout_sensitivity_N": h["heldout_sensitivity_N"],
                        "algebraic_connectivity": h["algebraic_connectivity"],
                        "min_connectivity": h["min_connectivity"], "mean_connectivity": h["mean_connectivity"],
                        "d": model.d, "method": model.method, "window": imp["window"],
                    })
    return rows


def run_improvement_study(cfg: dict, graphs: dict[str, dict]) -> pd.DataFrame:
    """Greedy edge addition from each start graph by every criterion, per seed (dssl.theory.improve).

    Start graphs: ``improvement.graphs`` or every non-complete graph with connectivity <=
    ``improvement.max_start_connectivity``. One theory model (client matrices at ``improvement.d``
    for ``improvement.method``) per seed is shared by all criteria; every step records the DecL
    sensitivity of the current graph (k <= c and k <= N) on that draw and on an independent draw (seed
    + HELDOUT_SEED_OFFSET; the "sensitivity" criterion is fitted to the first), its algebraic
    connectivity and min/mean |A_i|. Rows: graph, topology, connectivity, criterion, seed, step,
    edge_u, edge_v, sensitivity, sensitivity_N, heldout_sensitivity, heldout_sensitivity_N,
    algebraic_connectivity, min_connectivity, mean_connectivity, d, method, window.
    """
    cfg = resolve_theory_cfg(cfg)
    graphs = _validate_graphs(graphs, cfg["N"])
    imp = cfg["improvement"]
    _improvement_starts(cfg, graphs)  # fail early on unknown names
    seeds = cfg["seeds"] if imp["seeds"] is None else [int(s) for s in imp["seeds"]]
    tasks = [(_task_cfg(cfg), graphs, seed) for seed in seeds]
    results = _run_tasks(_improvement_task, tasks, cfg["n_jobs"], [1.0] * len(tasks))
    rows = [row for task_rows in results for row in task_rows]
    return pd.DataFrame(rows)


def check_theory_params(c: Checker) -> None:
    """The ``theory`` section's model options against ``resolve_theory_cfg`` (for ``dssl validate``)."""
    theory = c.params.get("theory")
    if not isinstance(theory, dict):
        return
    try:
        resolve_theory_cfg({k: v for k, v in theory.items() if k != "graphs"})
    except (ValueError, TypeError, KeyError) as err:
        c.add("theory", str(err).strip("'\""), "see docs/theory.md for the options")

"""The topology improvement study: greedy edge addition from the theory's graphs, per seed.

:func:`run_improvement_study` runs ``dssl.theory.improve``'s greedy edge addition from each start graph
by every criterion and records the DecL sensitivity (paper A, Theorem 4.4's s) of each step on the draw
the "sensitivity" criterion is fitted to and on an independent one; :func:`build_theory_model` is the
client matrices of one (d, seed, method) draw that the criterion and the scores read.
"""

from __future__ import annotations

import pandas as pd

from dssl.theory.options import DEFAULT_THEORY_CFG, resolve_theory_cfg, validate_graphs
from dssl.theory.parallel import limit_blas, run_tasks, task_cfg
from dssl.theory.solutions import TheoryModel
from dssl.theory.sweep import client_matrix_stacks

HELDOUT_SEED_OFFSET = 100_000  # data seed of the independent draw that scores improved graphs


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
    with limit_blas(cfg["blas_threads"]):
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
    with limit_blas(cfg["blas_threads"]):
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
    graphs = validate_graphs(graphs, cfg["N"])
    imp = cfg["improvement"]
    _improvement_starts(cfg, graphs)  # fail early on unknown names
    seeds = cfg["seeds"] if imp["seeds"] is None else [int(s) for s in imp["seeds"]]
    tasks = [(task_cfg(cfg), graphs, seed) for seed in seeds]
    results = run_tasks(_improvement_task, tasks, cfg["n_jobs"], [1.0] * len(tasks))
    rows = [row for task_rows in results for row in task_rows]
    return pd.DataFrame(rows)

"""The theory study's options: defaults, their resolution and checks, the graphs it takes.

The study (``dssl.theory.sweep``, ``dssl.theory.improvement_study``) reads one theory cfg, the
``theory`` section of ``params.yaml`` without its ``graphs``: the data model's sizes N and c (paper A,
Section 3.2: c >= 2N), the dimensions d, seeds, methods and frameworks, the augmentation and MIM forms
(docs/theory.md derives each from the objectives) and the improvement study's options.
:func:`resolve_theory_cfg` fills in ``DEFAULT_THEORY_CFG`` and names the key of every problem;
:func:`check_theory_params` runs it for ``dssl validate``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from dssl.theory.objectives import AUG_MODES, FRAMEWORKS, METHODS, MIM_FORMS, make_h, validate_adjacency

if TYPE_CHECKING:
    from dssl.config.checker import Checker

# "decl_nbhd" (opt-in): mean over clients of the minimiser of client i's neighbourhood objective
# (1/|A_i|) sum_{j in A_i} L_j -- the per-client models before DecL's final averaging (Eq. 26's X_i-bar).
EXTRA_FRAMEWORKS = ("decl_nbhd",)
TOPOLOGY_NAMES = ("uniform", "general", "complete")
IMPROVE_DEFAULT_CRITERIA = ("sensitivity", "algebraic_connectivity", "min_degree", "random")

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


def validate_graphs(graphs: dict[str, dict], n_clients: int) -> dict[str, dict]:
    """The graphs as the study reads them (adjacency, topology, target and actual mean |A_i| with self),
    each checked against the cfg's N clients; a problem is a ValueError naming the graph."""
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


def check_theory_params(c: Checker) -> None:
    """The ``theory`` section's model options against ``resolve_theory_cfg`` (for ``dssl validate``)."""
    theory = c.params.get("theory")
    if not isinstance(theory, dict):
        return
    try:
        resolve_theory_cfg({k: v for k, v in theory.items() if k != "graphs"})
    except (ValueError, TypeError, KeyError) as err:
        c.add("theory", str(err).strip("'\""), "see docs/theory.md for the options")

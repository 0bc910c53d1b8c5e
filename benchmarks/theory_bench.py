"""Wall time of the default theory study: sweep over d, seeds, methods, frameworks, graphs, plus the
greedy topology-improvement study (paper A's linear theory, dssl.theory).

    PYTHONPATH=src python benchmarks/theory_bench.py [--out DIR] [--d 64,128,256,512,1024]

Graphs: uniform and general topologies at mean |A_i| in {3, 5, 10, 20} over N = 20 clients (seed 0),
as in paper A's DecL study (Fig. 2a). Prints one line per part and the total; with --out also writes
the sweep/improvement tables, the claim checks and the three figures there.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from dssl.theory.improvement_study import run_improvement_study
from dssl.theory.options import DEFAULT_THEORY_CFG
from dssl.theory.sweep import run_theory_sweep, summarise
from dssl.theory.theorems import claim_checks
from dssl.topology.graphs import create_graph

CONNECTIVITIES = (3, 5, 10, 20)


def default_graphs(n_clients: int, seed: int = 0) -> dict[str, dict]:
    graphs = {}
    for topology in ("uniform", "general"):
        for connectivity in CONNECTIVITIES:
            graph = create_graph({"topology": topology, "connectivity": connectivity}, n_clients, seed)
            graphs[f"{topology}-{connectivity}"] = {
                "adjacency": graph.adjacency, "topology": topology, "connectivity": float(connectivity),
            }
    return graphs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write tables, claims and figures here")
    parser.add_argument("--d", type=str, default=None, help="comma-separated d values (default: cfg)")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: cfg n_jobs)")
    args = parser.parse_args()

    cfg = json.loads(json.dumps(DEFAULT_THEORY_CFG))
    if args.jobs is not None:
        cfg["n_jobs"] = args.jobs
    if args.d:
        cfg["d_values"] = [int(x) for x in args.d.split(",")]
    graphs = default_graphs(cfg["N"])
    print(
        f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f} n_jobs={cfg['n_jobs']} "
        f"d={cfg['d_values']} seeds={cfg['seeds']}"
    )

    t0 = time.perf_counter()
    sweep = run_theory_sweep(cfg, graphs)
    t1 = time.perf_counter()
    improvement = run_improvement_study(cfg, graphs)
    t2 = time.perf_counter()
    print(f"sweep        {t1 - t0:7.1f} s  ({len(sweep)} rows)")
    print(f"improvement  {t2 - t1:7.1f} s  ({len(improvement)} rows)")
    print(f"total        {t2 - t0:7.1f} s")

    checks = claim_checks(sweep)
    for check in checks:
        print(f"  {check['claim_id']:<32} from d={check['holds_from_d']}  {check['holds_by_d']}")
    if args.out:
        from dssl.theory.figures import plot_improvement, plot_sensitivity_vs_connectivity, plot_sensitivity_vs_d

        args.out.mkdir(parents=True, exist_ok=True)
        sweep.to_csv(args.out / "theory_sweep.csv", index=False)
        summarise(sweep).to_csv(args.out / "theory_summary.csv", index=False)
        improvement.to_csv(args.out / "theory_improvement.csv", index=False)
        (args.out / "theory_claims.json").write_text(json.dumps(checks, indent=1, default=str))
        plot_sensitivity_vs_d(sweep, args.out / "sensitivity_vs_d.png")
        plot_sensitivity_vs_connectivity(sweep, args.out / "sensitivity_vs_connectivity.png")
        plot_improvement(improvement, args.out / "improvement.png")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

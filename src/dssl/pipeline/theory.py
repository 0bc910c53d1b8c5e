"""Stage ``theory``: paper A's linear-model claims checked numerically at finite d, on the graphs of
the DecL grid, plus the greedy edge-addition study; tables, claim checks and figures in
``reports/theory/``, and a summary the report stage embeds."""

from __future__ import annotations

import json
from pathlib import Path

from dssl.pipeline.common import Stage, atomic_dir, graph_file

THEORY_DIR = Path("reports/theory")


def theory_graphs(params: dict) -> dict[str, dict]:
    """The theory section's graphs as the sweep takes them (adjacency, topology, target |A|)."""
    from dssl.topology.graphs import load_graph

    graphs = {}
    for name in params["theory"]["graphs"]:
        graph = load_graph(graph_file(name))[0]
        graphs[name] = {"adjacency": graph.adjacency, "topology": graph.topology,
                        "connectivity": float(graph.target_connectivity)}
    return graphs


def theory_cfg(params: dict) -> dict:
    return {k: v for k, v in params["theory"].items() if k != "graphs"}


def _claims_markdown(checks: list[dict]) -> str:
    lines = ["| claim | window | statement | holds from d | holds at largest d |", "|---|---|---|---|---|"]
    for check in checks:
        start = check["holds_from_d"] if check["holds_from_d"] is not None else "never"
        lines.append(f"| {check['claim_id']} | {check['value']} | {check['statement']} | {start} | "
                     f"{'yes' if check['holds_at_largest_d'] else 'no'} |")
    return "\n".join(lines)


def _summary_markdown(cfg: dict, summary, checks: list[dict]) -> str:
    table = summary.to_markdown(index=False, floatfmt=".4f") if hasattr(summary, "to_markdown") else summary.to_string()
    return "\n\n".join([
        f"Linear model of paper A (Sections 3-4, appendix A.6): N = {cfg['N']} clients, c = {cfg['c']}, "
        f"d in {cfg['d_values']}, seeds {cfg['seeds']}, mask ratio {cfg['mask_ratio']}, MIM matrix "
        f"'{cfg['mim_form']}' (derived from Eq. 4; see docs/theory.md for why the printed Eq. 17 is not used). "
        "Sensitivity s = max_k r_k - min_k r_k over the paper's window k <= c ('sensitivity') and over "
        "k <= N ('sensitivity_N', the coordinates the proofs bound).",
        "Read with the table: on a uniform (regular) graph every client has the same |A_i|, so the DecL "
        "objective (1/N) sum_i (1/|A_i|) sum_{j in A_i} L_j weights every L_j by 1/N: it *is* the FL "
        "objective whatever |A| is. Corollary 4.5 therefore cannot hold on uniform graphs and Theorem 4.6 "
        "holds there only with equality; only the general topology can separate them (docs/theory.md).",
        "**Per claim, from which d on it holds in these runs** (all larger d included):",
        _claims_markdown(checks),
        "Figures: [s against d](theory/sensitivity_vs_d.png), [s against |A|](theory/sensitivity_vs_connectivity.png), "
        "[adding edges](theory/improvement.png). Full table: [theory/summary.csv](theory/summary.csv).",
        "<details><summary>mean sensitivity per (d, method, framework, graph)</summary>\n\n" + table + "\n\n</details>",
    ])


def run(params_path: Path | str) -> Path:
    stage = Stage("theory", "", params_path)
    params = stage.params
    from dssl.theory.figures import plot_improvement, plot_sensitivity_vs_connectivity, plot_sensitivity_vs_d
    from dssl.theory.improvement_study import run_improvement_study
    from dssl.theory.options import resolve_theory_cfg
    from dssl.theory.sweep import run_theory_sweep, summarise
    from dssl.theory.theorems import claim_checks

    cfg = resolve_theory_cfg(theory_cfg(params))
    graphs = theory_graphs(params)
    sweep = run_theory_sweep(cfg, graphs)
    improvement = run_improvement_study(cfg, graphs)
    checks = claim_checks(sweep)
    summary = summarise(sweep)
    with atomic_dir(THEORY_DIR) as tmp:
        sweep.to_csv(tmp / "sweep.csv", index=False, float_format="%.10g")
        summary.to_csv(tmp / "summary.csv", index=False, float_format="%.10g")
        improvement.to_csv(tmp / "improvement.csv", index=False, float_format="%.10g")
        (tmp / "claims.json").write_text(json.dumps(checks, indent=1, sort_keys=True, default=str) + "\n")
        plot_sensitivity_vs_d(sweep, tmp / "sensitivity_vs_d.png")
        plot_sensitivity_vs_connectivity(sweep, tmp / "sensitivity_vs_connectivity.png")
        plot_improvement(improvement, tmp / "improvement.png")
        (tmp / "summary.md").write_text(_summary_markdown(cfg, summary, checks) + "\n")
    holds = {f"holds_at_largest_d.{c['claim_id']}.{c['value']}": float(bool(c["holds_at_largest_d"])) for c in checks}
    stage.log({"theory": params["theory"]}, holds,
              artifacts=[THEORY_DIR / n for n in ("summary.md", "claims.json", "sensitivity_vs_d.png",
                                                  "sensitivity_vs_connectivity.png", "improvement.png")],
              inputs=[graph_file(name) for name in params["theory"]["graphs"]])
    return THEORY_DIR

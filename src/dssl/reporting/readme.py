"""reports/README.md: paper A's Table 1 and Fig. 2a at small scale, measured next to the paper.

Paper A (FedMAR, ICLR 2026): Table 1 (FL pretraining under IID / label / feature non-IID data) and
Fig. 2a (DecL accuracy against average connectivity). The README states where the measured runs agree
or disagree with the paper's claims, calls gaps smaller than the pooled seed std seed noise, and links
every Table 1 number to the MLflow run of the stage that produced it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from dssl.reporting.figures import FL_LABEL, claims_fig2a, figure2a
from dssl.reporting.results import load_results, within_noise
from dssl.reporting.tables import (
    CELL, FAMILY_ORDER, IID, dataset_name, format_table1, linear_probe_table, load_paper_numbers,
    markdown_table, noniid_drops, paper_table1_cells, table1_cells, table1_csv, table1_markdown,
)

SCALE_NOTE = (
    "> **Scale.** These are small-scale runs: another dataset, fewer clients and rounds and smaller "
    "backbones than the paper. Their absolute accuracies are not comparable to the paper's; what can be "
    "compared is the direction of each effect (a drop from IID, a rise with |A|, an ordering). A gap "
    "smaller than the pooled standard deviation over seeds is called seed noise; with a single seed per "
    "number the noise is unknown."
)
PAPER_SCALE_NOTE = (
    "> **Scale.** This build uses the paper-scale profile: absolute accuracies are comparable to the "
    "paper's only where the datasets, backbones and settings above match it. A gap smaller than the "
    "pooled standard deviation over seeds is called seed noise; with a single seed per number the noise "
    "is unknown."
)
PROTOCOL_NAMES = {"finetune": "full fine-tuning", "linear_probe": "linear probe"}


def render_readme(context: Mapping[str, Any]) -> str:
    """The text of reports/README.md.

    ``context`` keys: ``results`` (DataFrame of :func:`load_results`), ``profile`` (str), ``dataset``
    (downstream dataset of Fig. 2a); optional: ``settings`` (mapping label -> value, e.g. clients, rounds,
    local epochs, backbones from params.yaml), ``figure2a`` (link to the Fig. 2a PNG, relative to the
    README), ``table1_csv`` (link to the Table 1 CSV), ``theory`` (Markdown text or None),
    ``protocol`` (Table 1 protocol, default "finetune"), ``fig2a_model`` and ``fig2a_partition``
    (needed when DecL results cover several), ``paper`` (paper numbers; default the packaged ones).
    """
    results = context["results"]
    paper = context.get("paper") or load_paper_numbers()
    protocol = context.get("protocol", "finetune")
    cells = table1_cells(results, protocol)
    sections = [
        _header(context, paper, len(results)),
        _table1_section(cells, paper, protocol, context.get("table1_csv")),
        _fig2a_section(results, context),
        _linear_probe_section(results),
        _theory_section(context.get("theory")),
        _lineage_section(cells),
    ]
    return "\n\n".join(sections).rstrip() + "\n"


def write_report(results_dir: Path | str, out_dir: Path | str, context: Mapping[str, Any]) -> dict[str, Path]:
    """Load the results and write README.md, table1.csv, linear_probe.csv and figures/fig2a-<dataset>.png.

    ``context`` is that of :func:`render_readme` without ``results``, ``figure2a`` and ``table1_csv``,
    which this function fills in. Returns the written paths by name.
    """
    results = load_results(results_dir)
    out_dir = Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    written = {"table1_csv": table1_csv(results, out_dir / "table1.csv", context.get("protocol", "finetune"))}
    written["linear_probe_csv"] = out_dir / "linear_probe.csv"
    linear_probe_table(results).to_csv(written["linear_probe_csv"], index=False)
    full = {**context, "results": results, "table1_csv": "table1.csv"}
    if _has_decl(results):
        figure = Path("figures") / f"fig2a-{context['dataset']}.png"
        written["figure2a"] = figure2a(results, out_dir / figure, context["dataset"],
                                       context.get("fig2a_model"), context.get("fig2a_partition"))
        full["figure2a"] = figure.as_posix()
    written["readme"] = out_dir / "README.md"
    written["readme"].write_text(render_readme(full))
    return written


def _has_decl(results: pd.DataFrame) -> bool:
    return bool(((results["framework"] == "decl") & (results["protocol"] == "finetune")).any())


def _pp(value: float) -> str:
    return f"{value:.2f}"


def _header(context: Mapping[str, Any], paper: Mapping[str, Any], runs: int) -> str:
    lines = [
        "# Paper A (FedMAR, ICLR 2026): Table 1 and Fig. 2a at small scale",
        f"Profile **{context['profile']}**, downstream dataset **{dataset_name(context['dataset'])}**; "
        f"built from {runs} evaluation result files.",
    ]
    settings = context.get("settings") or {}
    if settings:
        table = pd.DataFrame({"setting": list(settings),
                              "this build": [_setting_text(v) for v in settings.values()]})
        lines.append(markdown_table(table, index=False))
    t1, f2 = paper["table1_mim_vs_cl"]["setting"], paper["fig2a_connectivity"]["setting"]
    lines.append(
        f"Paper A's settings: Table 1 pretrains on Mini-ImageNet with {t1['clients']} clients, "
        f"{t1['per_round']} per round, {t1['local_epochs']} local epochs and {t1['rounds']} rounds, then "
        f"fully fine-tunes on CIFAR-10, CIFAR-100 and ImageNet; Fig. 2a uses {f2['clients']} clients, "
        f"{f2['local_epochs']} local epoch and {f2['rounds']} rounds, fine-tuned on CIFAR-100."
    )
    lines.append(PAPER_SCALE_NOTE if context["profile"] == "paper" else SCALE_NOTE)
    return "\n\n".join(lines)


def _setting_text(value: Any) -> str:
    if isinstance(value, (list, tuple, set)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _table1_section(cells: pd.DataFrame, paper: Mapping[str, Any], protocol: str, csv_link: str | None) -> str:
    title = f"## Table 1: FL pretraining under IID and non-IID data ({PROTOCOL_NAMES[protocol]})"
    if cells.empty:
        return f"{title}\n\nNo FL, central or random-init {protocol} results in this build."
    parts = [
        title,
        "Top-1 accuracy in %, mean over seeds (± std and [n] when there are several). In brackets the "
        "change from the IID column, as the paper prints it (↓ lower, ↑ higher). L/non-IID: Dirichlet "
        "label skew; F/non-IID: a fixed augmentation per client. The reference rows (random init, "
        "central pretraining) do not depend on the partition and fill the IID column only.",
        table1_markdown(format_table1(cells), paper),
    ]
    if csv_link:
        parts.append(f"The numbers with std, n and lineage as CSV: [{csv_link}]({csv_link}).")
    parts.append("**Claim check**\n\n" + "\n".join(
        f"- {finding}" for finding in _table1_findings(cells, paper_table1_cells(paper))))
    return "\n\n".join(parts)


def _table1_findings(cells: pd.DataFrame, paper_cells: pd.DataFrame) -> list[str]:
    return [_direction_finding(cells, paper_cells), _robustness_finding(cells, paper_cells)]


def _cell_name(row: Any) -> str:
    return f"{row.row}, {dataset_name(row.dataset)} {row.setting}"


def _direction_finding(cells: pd.DataFrame, paper_cells: pd.DataFrame) -> str:
    paper = noniid_drops(paper_cells)
    worst = paper.loc[paper["drop"].idxmin()]
    text = (f"Paper: non-IID pretraining lowers accuracy in {(paper['drop'] < 0).sum()} of {len(paper)} "
            f"cells (largest drop {_pp(-worst['drop'])} pp, {_cell_name(worst)}). ")
    drops = noniid_drops(cells)
    if drops.empty:
        return text + "Here: no non-IID cell has an IID partner, so the drop cannot be checked."
    above = drops[drops["drop"] >= 0]
    text += f"Here: lower in {len(drops) - len(above)} of {len(drops)} cells"
    if not above.empty:
        text += "; at or above IID in " + "; ".join(
            f"{_cell_name(r)} ({r.drop:+.2f} pp{_noise_words(r.within_noise)})" for r in above.itertuples())
    text += ". " + _noise_summary(list(drops["within_noise"]), "gaps")
    if above.empty:
        return text + " This agrees with the paper."
    return text + f" For the exceptions, {_verdict(list(above['within_noise']))}."


def _flags(values: Any) -> list[bool | None]:
    """Seed-noise flags as Python bools or None (a pandas column may hold numpy bools)."""
    return [None if value is None else bool(value) for value in values]


def _noise_words(flag: bool | None) -> str:
    if flag is None:
        return ", single seed"
    return ", within seed noise" if flag else ", beyond seed noise"


def _verdict(values: Any) -> str:
    """How exceptions to a paper claim read, given their seed-noise flags."""
    flags = _flags(values)
    if all(flag is True for flag in flags):
        return "these gaps are within seed noise, so they do not contradict the paper"
    if any(flag is False for flag in flags):
        return "this disagrees with the paper"
    return "this disagrees with the paper, though single seeds cannot tell it from noise"


def _noise_summary(values: Any, what: str) -> str:
    flags = _flags(values)
    known = [f for f in flags if f is not None]
    if not known:
        return "Every number here has a single seed, so seed noise is unknown and small gaps may be noise."
    text = (f"{sum(known)} of {len(known)} {what} with a seed std are within seed noise "
            "(smaller than the pooled std).")
    if len(known) < len(flags):
        text += f" {len(flags) - len(known)} rest on single seeds (noise unknown)."
    return text


def _robustness_finding(cells: pd.DataFrame, paper_cells: pd.DataFrame) -> str:
    paper = _mae_vs_simsiam(paper_cells)
    text = (f"Paper: MAE loses less accuracy to non-IID data than SimSiam in {sum(paper['mae_less'])} of "
            f"{len(paper)} (backbone, dataset, non-IID) comparisons. ")
    measured = _mae_vs_simsiam(cells)
    if measured.empty:
        return text + ("Here: no backbone family has SimSiam and MAE with IID and non-IID runs, so this "
                       "cannot be checked.")
    exceptions = measured[~measured["mae_less"]]
    text += f"Here: in {len(measured) - len(exceptions)} of {len(measured)}"
    if not exceptions.empty:
        text += "; not in " + "; ".join(
            f"{r.family} {dataset_name(r.dataset)} {r.setting} (MAE {r.mae_drop:+.2f} vs SimSiam "
            f"{r.simsiam_drop:+.2f} pp{_noise_words(r.within_noise)})" for r in exceptions.itertuples())
    text += ". " + _noise_summary(list(measured["within_noise"]), "differences")
    if exceptions.empty:
        return text + " This agrees with the paper."
    return text + f" For the exceptions, {_verdict(list(exceptions['within_noise']))}."


def _mae_vs_simsiam(cells: pd.DataFrame) -> pd.DataFrame:
    """Per family, dataset and non-IID setting: both drops and whether MAE's is the smaller loss."""
    drops = noniid_drops(cells).set_index(CELL)["drop"]
    spread = cells.set_index(CELL)
    rows = []
    for family in FAMILY_ORDER:
        simsiam, mae = f"SimSiam + {family}", f"MAE + {family}"
        for (row, dataset, setting), simsiam_drop in drops.items():
            if row != simsiam or (mae, dataset, setting) not in drops.index:
                continue
            mae_drop = drops[(mae, dataset, setting)]
            keys = [(r, dataset, s) for r in (simsiam, mae) for s in (IID, setting)]
            noise = within_noise(mae_drop - simsiam_drop, [spread.loc[k, "std"] for k in keys],
                                 [spread.loc[k, "n"] for k in keys])
            rows.append({"family": family, "dataset": dataset, "setting": setting, "simsiam_drop": simsiam_drop,
                         "mae_drop": mae_drop, "mae_less": mae_drop > simsiam_drop, "within_noise": noise})
    return pd.DataFrame(rows, columns=["family", "dataset", "setting", "simsiam_drop", "mae_drop",
                                       "mae_less", "within_noise"])


def _fig2a_section(results: pd.DataFrame, context: Mapping[str, Any]) -> str:
    title = "## Fig. 2a: DecL accuracy against connectivity"
    if not _has_decl(results):
        return f"{title}\n\nNo DecL fine-tune results in this build."
    claims = claims_fig2a(results, context["dataset"], context.get("fig2a_model"),
                          context.get("fig2a_partition"))
    parts = [title]
    if context.get("figure2a"):
        parts.append(f"![Fig. 2a: DecL accuracy against |A|]({context['figure2a']})")
    parts.append(
        f"DecL fine-tune accuracy on {dataset_name(claims['dataset'])} for {claims['model']} pretrained on "
        f"partition {claims['partition']}, against the average connectivity |A| (self included); points "
        "are means over seeds, bars the std. Paper A's claim (Fig. 2a gives its values only in the figure, "
        "so none are drawn): DecL accuracy rises monotonically with |A|, and FL is never below DecL. The FL "
        "reference here is the DecL run on the "
        f"complete graph (\"{FL_LABEL}\"): uniform mixing over all clients equals FedAvg with every client "
        "taking part and uniform weights."
    )
    bullets = [_topology_finding(topology, c) for topology, c in claims["topologies"].items()]
    bullets.append(_fl_finding(claims))
    parts.append("**Claim check**\n\n" + "\n".join(f"- {b}" for b in bullets))
    parts.append(_fig2a_summary(claims))
    return "\n\n".join(parts)


def _topology_finding(topology: str, claims: Mapping[str, Any]) -> str:
    values = (f"at |A| = {', '.join(f'{c:g}' for c in claims['connectivity'])}: "
              f"{', '.join(_pp(a) for a in claims['accuracy'])} %")
    rho = _rho(claims["spearman_rho"])
    if claims["non_decreasing"]:
        return f"{topology}: accuracy rises with |A| ({values}; Spearman rho = {rho})."
    falls = "; ".join(
        f"from {d['from']:g} to {d['to']:g} by {_pp(-d['change'])} pp{_noise_words(d['within_noise'])}"
        for d in claims["decreases"])
    verdict = _verdict([d["within_noise"] for d in claims["decreases"]])
    return (f"{topology}: accuracy does not rise monotonically with |A| ({values}; Spearman "
            f"rho = {rho}); it falls {falls}; {verdict}.")


def _fl_finding(claims: Mapping[str, Any]) -> str:
    fl = claims["fl"]
    if fl is None:
        return "FL: no complete-graph DecL run, so \"FL never below DecL\" cannot be checked."
    if claims["fl_never_below_decl"] is None:
        return f"{FL_LABEL}: {_pp(fl['accuracy'])} %; no DecL point to compare with."
    if claims["fl_never_below_decl"]:
        return f"{FL_LABEL}: {_pp(fl['accuracy'])} %, at or above every DecL point, as the paper claims."
    above = "; ".join(
        f"{s['topology']} |A| = {s['connectivity']:g} by {_pp(s['gap'])} pp{_noise_words(s['within_noise'])}"
        for s in claims["fl_shortfalls"])
    verdict = _verdict([s["within_noise"] for s in claims["fl_shortfalls"]])
    return f"{FL_LABEL}: {_pp(fl['accuracy'])} %, below DecL at {above}; {verdict}."


def _fig2a_summary(claims: Mapping[str, Any]) -> str:
    topologies = claims["topologies"]
    if not topologies:
        return "In these runs there is no uniform or general DecL point, so the trend cannot be checked."
    named = {t: f"{t} topology (rho = {_rho(c['spearman_rho'])})" for t, c in topologies.items()}
    rising = [named[t] for t, c in topologies.items() if c["non_decreasing"]]
    flat = [named[t] for t, c in topologies.items() if not c["non_decreasing"]]
    if rising and flat:
        return (f"In these runs accuracy rises with |A| for the {' and the '.join(rising)} but not for the "
                f"{' and the '.join(flat)}.")
    verb = "rises" if rising else "does not rise monotonically"
    return f"In these runs accuracy {verb} with |A| for the {' and the '.join(rising or flat)}."


def _rho(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _linear_probe_section(results: pd.DataFrame) -> str:
    title = "## Linear probe: does SSL pretraining beat random init?"
    table = linear_probe_table(results)
    if table.empty:
        return f"{title}\n\nNo linear-probe results in this build."
    intro = ("A linear classifier on the frozen backbone; the baseline is the same backbone family from "
             "random init, probed the same way. Margin = SSL minus random init, in percentage points.")
    return "\n\n".join([title, intro, markdown_table(table, index=False), _linear_probe_summary(table)])


def _linear_probe_summary(table: pd.DataFrame) -> str:
    compared = table[table["margin (pp)"].notna()]
    missing = len(table) - len(compared)
    if compared.empty:
        return "No pretrained model has a random-init run of its backbone family to compare with."
    wins = compared[compared["margin (pp)"] > 0]
    noisy = compared["SSL beats random init?"].str.contains("within seed noise").sum()
    text = f"SSL pretraining beats the random-init backbone in {len(wins)} of {len(compared)} comparisons"
    text += f" ({noisy} of them within seed noise)." if noisy else "."
    losses = compared[compared["margin (pp)"] <= 0]
    if not losses.empty:
        text += " It does not for " + "; ".join(
            f"{r.model} ({r.framework}, {r.setting}, {r.dataset})" for r in losses.itertuples()) + "."
    if missing:
        text += f" {missing} result(s) have no random-init run to compare with."
    return text


def _theory_section(theory: str | None) -> str:
    body = theory.strip() if theory and theory.strip() else "_No theory text was provided for this build._"
    return f"## Theory\n\n{body}"


def _lineage_section(cells: pd.DataFrame) -> str:
    title = "## Lineage"
    intro = ("Every number above comes from an evaluate stage, and every stage run is logged as one MLflow "
             "run in the project's tracking store with its lineage (git commit, params hash, hashes of its "
             "inputs); a run is found by its id or its stage name. The Table 1 cells and the runs behind "
             "them (one per seed):")
    rows = [
        {"row": cell.row, "column": f"{dataset_name(cell.dataset)} {cell.setting}", "seed": seed,
         "stage": stage, "MLflow run id": "(not logged)" if _is_missing(run_id) else run_id}
        for cell in cells.itertuples() for seed, stage, run_id in cell.runs
    ]
    if not rows:
        return f"{title}\n\nNo Table 1 cell in this build."
    return "\n\n".join([title, intro, markdown_table(pd.DataFrame(rows), index=False)])


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))

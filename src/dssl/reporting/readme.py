"""reports/README.md (and README.html): every registered section the params list, each with its CSV,
figures and claims.

The report opens with what ran (profile, datasets, seeds, run time, hardware), the verdict counts and
the claims overview figure (every checked claim's paired difference with its interval, coloured by
verdict), then the verdicts per claim, the settings as a list and one row per checked claim, then the
sections in the order ``report.sections`` lists them. Each section's data is also written as
``<section>.csv``, so every printed number can be traced to its cells and MLflow runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from dssl.artifacts import ArtifactError
from dssl.reporting.claims import ALL_VERDICTS, UNTESTABLE, Finding, gate_failures
from dssl.reporting.results import load_graph_stats, load_results, load_weight_distances
from dssl.reporting.sections import FIGURES, FOLDER, ReportContext, SectionOutput, create_section
from dssl.reporting.tables import dataset_name, load_paper_numbers, markdown_table
from dssl.reporting.verdicts import (VerdictRecord, disagreeing_records, fragile_keys, is_fragile, kernel_kinds,
                                     verdicts_elsewhere)

TITLE = "# Distributed SSL under non-IID data: the papers' tables and figures at this build's scale"
SCALE_NOTE = (
    "> **Scale.** These are small-scale runs: another dataset, fewer clients and rounds and smaller "
    "backbones than the papers. Their absolute accuracies are not comparable to the papers'; what can be "
    "compared is the direction of each effect (a drop from IID, a rise with |A|, an ordering). Each "
    "claim is judged on the per-seed paired difference and its 95 % Student-t interval: \"supported\" "
    "when the whole interval lies on the paper's side of 0, \"contradicted\" when it lies on the other "
    "side, \"inconclusive\" otherwise, and \"untestable\" when a pretraining the claim needs (its gated "
    "arms: the one it says is higher, or every arm of a difference of differences or a distance) does not "
    "beat the same backbone from random init."
)
PAPER_SCALE_NOTE = (
    "> **Scale.** This build uses the paper-scale profile: absolute accuracies are comparable to the "
    "papers' only where the datasets, backbones and settings above match them. Verdicts are computed "
    "from paired per-seed differences and their 95 % Student-t intervals, as in the small-scale build."
)
SUMMARY_TITLE = "## Summary"
VERDICTS_TITLE = "## Verdicts per claim"
CONTENTS_TITLE = "## Contents"
SETTINGS_TITLE = "## Settings"
CLAIMS_TITLE = "## Claims at a glance"
ELSEWHERE_TITLE = "## Verdicts on other CPU kernels"
FRAGILE = "fragile"
PRECONDITION = "pretraining_gain"
CLAIMS_FIGURE = "claims.png"
FOREST_X_LABEL = ("paired difference ({unit}), signed so that > 0 is the paper's direction; "
                  "bar: 95 % interval over seeds")


def build_sections(ctx: ReportContext, sections: Mapping[str, Mapping[str, Any] | None]) -> list[SectionOutput]:
    """Render every section named in ``sections`` (name -> its options) in that order."""
    return [create_section(name, options).render(ctx) for name, options in sections.items()]


def checked_claims(findings: list[Finding]) -> list[Finding]:
    """The papers' claims (the pretraining gain, the precondition of every claim, is counted apart)."""
    return [f for f in findings if f.section != PRECONDITION]


def compare_elsewhere(findings: list[Finding], records: list[VerdictRecord]
                      ) -> tuple[pd.DataFrame | None, set[tuple[str, str, str]]]:
    """The claims' verdicts beside those of ``records`` (:func:`verdicts_elsewhere`; None without
    records) and the keys of the fragile ones."""
    if not records:
        return None, set()
    elsewhere = verdicts_elsewhere(checked_claims(findings), list(records))
    return elsewhere, fragile_keys(elsewhere)


def render_readme(ctx: ReportContext, outputs: list[SectionOutput], records: list[VerdictRecord] = (),
                  compared: tuple[pd.DataFrame | None, set] | None = None) -> str:
    """The text of reports/README.md from rendered sections and the verdict records of other runs
    (``compared``: :func:`compare_elsewhere` of them, when the caller has it already)."""
    findings = [f for out in outputs for f in out.findings]
    elsewhere, fragile = compared if compared is not None else compare_elsewhere(findings, list(records))
    parts = [TITLE, summary(ctx, findings, elsewhere, records, fragile), verdicts_per_claim(findings, fragile),
             other_kernels(elsewhere, records, _hardware(ctx)), contents(outputs, bool(records)),
             settings_list(ctx.settings),
             claims_summary(findings, fragile)]
    parts += [out.markdown for out in outputs]
    return "\n\n".join(p for p in parts if p).rstrip() + "\n"


def summary(ctx: ReportContext, findings: list[Finding], elsewhere: pd.DataFrame | None = None,
            records: list[VerdictRecord] = (), fragile: set[tuple[str, str, str]] = frozenset()) -> str:
    """What ran, the verdict counts and the claims overview figure: the report's first screen
    (``elsewhere``, ``fragile``: :func:`compare_elsewhere` of ``records``)."""
    claims, preconditions = checked_claims(findings), [f for f in findings if f.section == PRECONDITION]
    lines = [SUMMARY_TITLE, what_ran(ctx)]
    if claims:
        counts = pd.Series([f.verdict for f in claims]).value_counts()
        lines.append(f"**{len(claims)} claims of the papers checked: " + ", ".join(
            f"{int(counts.get(v, 0))} {v}" for v in ALL_VERDICTS) + ".**" + _gate_sentence(preconditions)
            + _fragile_sentence(claims, elsewhere, records, _hardware(ctx), fragile))
        lines.append(f"![Every checked claim: paired difference with its 95 % interval, coloured by verdict]"
                     f"({FIGURES}/{CLAIMS_FIGURE})")
    else:
        lines.append("No claim of the papers could be checked in this build." + _gate_sentence(preconditions))
    lines.append(PAPER_SCALE_NOTE if ctx.profile == "paper" else SCALE_NOTE)
    return "\n\n".join(lines)


def _fragile_sentence(claims: list[Finding], elsewhere: pd.DataFrame | None, records: list[VerdictRecord],
                      hardware: list[str], fragile: set[tuple[str, str, str]]) -> str:
    if not records or elsewhere is None:
        return ""
    compared = [r.label for r in records if r.comparable]
    if not compared:
        return (f" The verdicts recorded on other CPU kernels ({', '.join(r.label for r in records)}) come "
                "from other params or code than this build: no claim is marked fragile "
                "(section \"Verdicts on other CPU kernels\").")
    count = sum(is_fragile(f, fragile) for f in claims)
    same = _same_kernels(records, hardware)
    caveat = (f"; every compared run used the same CPU kernels as this build ({same}): no other kind is compared yet"
              if same else "")
    differ = disagreeing_records(elsewhere, records)
    found = (f"{_listed(differ)} gave another verdict with the same params and code" if differ else
             "every run with the same params and code gave the same verdicts")
    verb = "is" if count == 1 else "are"
    return (f" **{count} of {len(claims)} claims {verb} {FRAGILE}**: {found}{caveat} (compared: {', '.join(compared)}; "
            "section \"Verdicts on other CPU kernels\").")


def _listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(filter(None, [", ".join(names[:-1]), names[-1]])) if names else ""


def _same_kernels(records: list[VerdictRecord], hardware: list[str]) -> str | None:
    """The build's kernel kinds when every comparable record ran no other (agreement then shows nothing
    about other CPUs), else None."""
    here = kernel_kinds(hardware)
    compared = [record for record in records if record.comparable]
    if here and compared and all(record.kernel_kinds() <= here for record in compared):
        return ", ".join(sorted(here))
    return None


def _gate_sentence(preconditions: list[Finding]) -> str:
    if not preconditions:
        return ""
    passed = sum(f.verdict == "supported" for f in preconditions)
    return (f" Pretraining beats the random-init backbone in {passed} of {len(preconditions)} cells x protocols "
            "(the gate of every claim: section \"Does SSL pretraining beat random init?\").")


def _seeds_text(ctx: ReportContext) -> str:
    """"seeds 0, 1, 2", or, where grids give cells their own, "seeds 0, 1, 2, 3, 4 (2, 3 or 5 per cell)"."""
    if not ctx.seeds:
        return "no seeds"
    text = f"seeds {', '.join(str(s) for s in ctx.seeds)}"
    per_cell = sorted(set(ctx.results.groupby(["stage", "dataset", "protocol"], dropna=False)["seed"].nunique()))
    if len(per_cell) > 1:
        counts = [str(count) for count in per_cell]
        text += f" ({', '.join(counts[:-1])} or {counts[-1]} per cell)"
    return text


def what_ran(ctx: ReportContext) -> str:
    """One paragraph: profile, datasets, seeds, stages and run time, hardware."""
    run = ctx.run or {}
    scored = sorted(set(ctx.results["dataset"])) if not ctx.results.empty else [ctx.dataset]
    parts = [f"profile **{ctx.profile}**"]
    if run.get("pretraining"):
        parts.append(f"pretraining on {run['pretraining']}")
    parts.append("scored on " + ", ".join(dataset_name(d) for d in scored))
    parts.append(_seeds_text(ctx))
    if run.get("stages"):
        timing = f"{run['stages']} stages, {run['stage_seconds']:.0f} s inside stages"
        if run.get("wall_seconds") is not None:
            timing += f", {run['wall_seconds']:.0f} s from the first stage's start to the last one's end"
        parts.append(timing + " (MLflow's latest run of each stage)")
    text = "**What ran:** " + "; ".join(parts) + f"; {len(ctx.results)} evaluation result files"
    if ctx.results.empty:
        return text + "."
    machines = ctx.results["hardware"].fillna("hardware not recorded").value_counts()
    return text + ", evaluated on " + "; ".join(
        label if len(machines) == 1 else f"{label} ({count} files)" for label, count in machines.items()) + "."


def verdicts_per_claim(findings: list[Finding], fragile: set = frozenset()) -> str:
    """One row per claim of the papers: how many cells it was checked on and the verdicts there (and how
    many of them are fragile, when other CPU kernels' verdicts are compared)."""
    claims = checked_claims(findings)
    if not claims:
        return ""
    frame = pd.DataFrame({"claim": [f.claim for f in claims], "verdict": [f.verdict for f in claims]})
    table = frame.groupby("claim", sort=False)["verdict"].value_counts().unstack(fill_value=0)
    table = table.reindex(columns=list(ALL_VERDICTS), fill_value=0)
    table.insert(0, "checked", table.sum(axis=1))
    if fragile:
        counts = pd.Series([f.claim for f in claims if is_fragile(f, fragile)]).value_counts()
        table[FRAGILE] = [int(counts.get(claim, 0)) for claim in table.index]
    return f"{VERDICTS_TITLE}\n\n" + markdown_table(table.astype(int))


def _hardware(ctx: ReportContext) -> list[str]:
    return [] if ctx.results.empty else list(ctx.results["hardware"].dropna().unique())


def other_kernels(elsewhere: pd.DataFrame | None, records: list[VerdictRecord], hardware: list[str] = ()) -> str:
    """Both verdict lists: this build's and each record's, claim by claim, with where each record ran, and
    whether any comparable record ran other CPU kernels than this build (``hardware``: its result files')."""
    if elsewhere is None or not records:
        return ""
    lines = [ELSEWHERE_TITLE, "The same pipeline run elsewhere (`dssl verdicts export`, listed in "
             "`report.verdicts_elsewhere`). A claim is **fragile** where a run with this build's params and code "
             "gave another verdict: at this scale its verdict follows the CPU's kernels, not only the data.",
             "\n".join(f"- {record.describe()}" for record in records)]
    kinds = _same_kernels(records, list(hardware))
    if kinds:
        lines.append(f"Every record compared here ran the same CPU kernels as this build ({kinds}): no other kind "
                     "has been compared yet, so agreement here marks no claim robust. A run on another kind, "
                     "exported and listed in `report.verdicts_elsewhere`, is what can find the fragile ones.")
    if elsewhere.empty:
        return "\n\n".join(lines)
    table = elsewhere.drop(columns=["section", "cells"]).copy()
    table["fragile"] = table["fragile"].map({True: "**fragile**", False: ""})
    lines.append(markdown_table(table, index=False))
    return "\n\n".join(lines)


def contents(outputs: list[SectionOutput], elsewhere: bool = False) -> str:
    """Links to the report's parts (GitHub's heading anchors, which the HTML rendering reproduces)."""
    from dssl.reporting.html import slug

    headings = [*([ELSEWHERE_TITLE] if elsewhere else []), SETTINGS_TITLE, CLAIMS_TITLE,
                *(out.markdown.split("\n", 1)[0] for out in outputs)]
    names = [h.removeprefix("## ") for h in headings]
    return f"{CONTENTS_TITLE}\n\n" + " · ".join(f"[{name}](#{slug(name)})" for name in names)


def settings_list(settings: Mapping[str, Any]) -> str:
    """The settings a reader needs to interpret the numbers: a heading per kind, one line per entry."""
    if not settings:
        return ""
    lines = [f"{SETTINGS_TITLE}\n\nAs `params.yaml` states them (every name below is a registry key, a stage name "
             "part and a row label of this report)."]
    for heading, entries in settings.items():
        if isinstance(entries, (list, tuple)):
            lines.append(f"**{heading}**\n\n" + "\n".join(f"- {entry}" for entry in entries))
        else:
            lines.append(f"**{heading}**: {entries}")
    return "\n\n".join(lines)


def claims_summary(findings: list[Finding], fragile: set = frozenset()) -> str:
    """One row per checked claim of the papers: the claim, the complete compared cells, the verdict and
    the evidence (the pretraining gain is its own section)."""
    claims = checked_claims(findings)
    lines = [CLAIMS_TITLE]
    if not claims:
        lines.append("No claim of the papers could be checked in this build.")
        return "\n\n".join(lines)
    lines.append("Every claim is checked on the paired per-seed difference of the cells it compares, named "
                 "`<protocol> on <dataset>: <framework>/<model>/<partition or graph>/<strategy>`.")
    table = pd.DataFrame({"claim": [f.claim for f in claims], "compared": [f.subject for f in claims],
                          "cells": [f.cells for f in claims],
                          "verdict": [f"**{f.verdict}**" + (f" ({FRAGILE})" if is_fragile(f, fragile) else "")
                                      for f in claims],
                          "evidence": [f.evidence() for f in claims]})
    lines.append(markdown_table(table, index=False))
    return "\n\n".join(lines)


def claims_forest(findings: list[Finding], fragile: set = frozenset()) -> pd.DataFrame:
    """The claims overview figure's rows (``figures.FOREST_COLUMNS``): every checked claim (a fragile one
    labelled so)."""
    rows = []
    for f in checked_claims(findings):
        oriented = f.oriented() or (float("nan"),) * 3
        label = f.subject + (f" [{FRAGILE}]" if is_fragile(f, fragile) else "")
        rows.append({"group": f.claim, "label": label, "verdict": f.verdict, "difference": oriented[0],
                     "low": oriented[1], "high": oriented[2], "reason": untestable_reason(f), "unit": f.unit})
    return pd.DataFrame(rows, columns=["group", "label", "verdict", "difference", "low", "high", "reason", "unit"])


def untestable_reason(finding: Finding) -> str:
    """A short reason for an untestable claim: the compared cells that do not beat random init."""
    if finding.verdict != UNTESTABLE:
        return ""
    failing = gate_failures(finding.detail)
    if failing:
        verb = "does" if len(failing) == 1 else "do"
        return f"untestable: {', '.join(failing)} {verb} not beat random init"
    return "untestable: " + finding.detail.removeprefix("untestable: ")


def findings_frame(outputs: list[SectionOutput]) -> pd.DataFrame:
    """Every finding as one CSV row: section, claim, subject, complete cells, verdict, paired difference with
    its interval in the finding's unit (pp for accuracies), seeds, the arms the gate read."""
    rows = [{"section": f.section, "claim": f.claim, "subject": f.subject, "cells": f.cells, "verdict": f.verdict,
             "difference": f.scale * f.difference.mean if f.difference else None,
             "low": f.scale * f.difference.low if f.difference else None,
             "high": f.scale * f.difference.high if f.difference else None,
             "unit": f.unit, "n_seeds": f.difference.n if f.difference else None, "detail": f.detail,
             "gated": f.gated_text()}
            for out in outputs for f in out.findings]
    return pd.DataFrame(rows, columns=["section", "claim", "subject", "cells", "verdict", "difference", "low", "high",
                                       "unit", "n_seeds", "detail", "gated"])


def write_report(results_dir: Path | str, out_dir: Path | str, sections: Mapping[str, Mapping[str, Any] | None],
                 context: Mapping[str, Any]) -> dict[str, Path]:
    """Load the results; write README.md, README.html and, in ``FOLDER``, claims.csv and each section's CSV;
    in ``FIGURES`` every figure.

    ``context``: ``profile``, ``dataset`` (downstream dataset the tables show); optional ``settings``
    (heading -> entries), ``theory`` (Markdown), ``paper`` (paper numbers; default the packaged ones),
    ``weight_distances`` (the folder of the weight_distance stages' outputs), ``features`` (the folder of
    the features stages' outputs), ``graphs`` (the folder of the graph stages' outputs), ``models`` and
    ``strategies`` (params.yaml's entries, which sections quote to say what ran), ``data_figures`` (kind ->
    name -> figure path relative to ``out_dir``, drawn by other stages), ``run`` (``what_ran``'s facts),
    ``verdict_records`` (the verdicts of other runs, ``verdicts.VerdictRecord``) and ``assets`` (folders
    where the HTML rendering looks for images ``out_dir`` does not hold: the final report folder when
    ``out_dir`` is a scratch copy) and ``result_folders`` (the evaluation stages' result folders: files
    elsewhere under ``results_dir`` are not read). Returns written paths.
    """
    distances = context.get("weight_distances")
    graphs = context.get("graphs")
    ctx = ReportContext(results=load_results(results_dir, context.get("result_folders")),
                        profile=context["profile"], dataset=context["dataset"],
                        paper=context.get("paper") or load_paper_numbers(), settings=context.get("settings") or {},
                        theory=context.get("theory"),
                        weight_distances=load_weight_distances(distances) if distances is not None else None,
                        features=context.get("features"), data_figures=context.get("data_figures") or {},
                        run=context.get("run") or {}, graphs=load_graph_stats(graphs) if graphs is not None else {},
                        models=context.get("models") or {}, strategies=context.get("strategies") or {})
    outputs = build_sections(ctx, sections)
    out_dir = Path(out_dir)
    folder, figures = out_dir / FOLDER, out_dir / FIGURES
    folder.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for out in outputs:
        if out.data is not None:
            written[f"{out.name}.csv"] = _write_csv(out.data, folder / f"{out.name}.csv")
        for name, draw in out.figures.items():
            written[name] = draw(figures / name)
    written["claims.csv"] = _write_csv(findings_frame(outputs), folder / "claims.csv")
    records = list(context.get("verdict_records") or [])
    findings = [f for out in outputs for f in out.findings]
    elsewhere, fragile = compared = compare_elsewhere(findings, records)
    if elsewhere is not None:
        written["verdicts_elsewhere.csv"] = _write_csv(elsewhere, folder / "verdicts_elsewhere.csv")
    forest_rows = claims_forest(findings, fragile)
    if not forest_rows.empty:
        from dssl.reporting.figures import forest

        written[CLAIMS_FIGURE] = forest(forest_rows, figures / CLAIMS_FIGURE,
                                        "Every checked claim of the papers (grouped by claim)", FOREST_X_LABEL,
                                        ctx.note("each claim's protocol: see its cells in the claims table"))
    text = render_readme(ctx, outputs, records, compared)
    written["readme"] = out_dir / "README.md"
    written["readme"].write_text(text)
    from dssl.reporting.html import render_html

    written["html"] = out_dir / "README.html"
    written["html"].write_text(render_html(text, [out_dir, *context.get("assets", ())]))
    return written


def _write_csv(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False, float_format="%.4f")
    return path


# -- the project README's "Expected results" block, copied from a generated report ------------------

BLOCK_START = "<!-- expected-results:start (written by `dssl readme sync` from reports/README.md) -->"
BLOCK_END = "<!-- expected-results:end -->"
EXPECTED_SECTIONS = ("Summary", "Verdicts per claim")   # heading prefixes of the report's sections


def report_sections(text: str) -> dict[str, str]:
    """The ``## `` sections of a generated report: heading -> the section's text, heading included."""
    parts = text.split("\n## ")
    return {part.split("\n", 1)[0]: "## " + part for part in parts[1:]}


def expected_results_block(report_text: str, prefixes: tuple[str, ...] = EXPECTED_SECTIONS) -> str:
    """The report's sections whose heading starts with one of ``prefixes``, one level deeper."""
    sections = report_sections(report_text)
    chosen = [text for prefix in prefixes for heading, text in sections.items() if heading.startswith(prefix)]
    if not chosen:
        raise ValueError(f"the report has none of the sections {list(prefixes)}; was it generated by the report stage?")
    return "\n\n".join("#" + text.strip() for text in chosen)


def readme_links(block: str) -> str:
    """A report block as the project README shows it: links made relative to the project root; figures
    left out (they exist only after a run, and the README is read before one)."""
    kept = [line for line in block.splitlines() if not line.startswith("![")]
    text = "\n".join(kept)
    for folder in (FOLDER, FIGURES.split("/")[0]):
        text = text.replace(f"]({folder}/", f"](reports/{folder}/")
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text


def sync_readme(readme: Path, report: Path, check: bool = False) -> bool:
    """Replace the README's expected-results block by the report's; True when it changed (or would).
    ``ArtifactError`` (one line naming the file and the fix) when there is no report yet (a clean clone)
    or the README lacks its block."""
    readme, report = Path(readme), Path(report)
    if not report.is_file():
        raise ArtifactError(report, "no generated report", recovery="Run `make repro` first.")
    text = readme.read_text()
    if text.count(BLOCK_START) != 1 or text.count(BLOCK_END) != 1 or text.index(BLOCK_START) > text.index(BLOCK_END):
        raise ArtifactError(readme, f"needs exactly one block between {BLOCK_START!r} and {BLOCK_END!r}",
                            recovery=f"Restore it with `git checkout {readme.name}`.")
    head, rest = text.split(BLOCK_START)
    _, tail = rest.split(BLOCK_END)
    block = readme_links(expected_results_block(report.read_text()))
    new = f"{head}{BLOCK_START}\n{block}\n{BLOCK_END}{tail}"
    if new != text and not check:
        readme.write_text(new)
    return new != text

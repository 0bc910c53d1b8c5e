"""reports/README.md: every registered section the params list, each with its CSV, figures and claims.

The README opens with the build's settings and a summary of every checked claim (verdict and paired
evidence), then the sections in the order ``report.sections`` lists them. Each section's data is also
written as ``<section>.csv``, so every printed number can be traced to its cells and MLflow runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from dssl.reporting.claims import ALL_VERDICTS, Finding
from dssl.reporting.results import load_graph_stats, load_results, load_weight_distances
from dssl.reporting.sections import FOLDER, ReportContext, SectionOutput, create_section
from dssl.reporting.tables import dataset_name, load_paper_numbers, markdown_table

SCALE_NOTE = (
    "> **Scale.** These are small-scale runs: another dataset, fewer clients and rounds and smaller "
    "backbones than the papers. Their absolute accuracies are not comparable to the papers'; what can be "
    "compared is the direction of each effect (a drop from IID, a rise with |A|, an ordering). Each "
    "claim is judged on the per-seed paired difference and its 95 % Student-t interval: \"supported\" "
    "when the whole interval lies on the paper's side of 0, \"contradicted\" when it lies on the other "
    "side, \"inconclusive\" otherwise, and \"untestable\" when a compared pretraining does not beat the "
    "same backbone from random init."
)
PAPER_SCALE_NOTE = (
    "> **Scale.** This build uses the paper-scale profile: absolute accuracies are comparable to the "
    "papers' only where the datasets, backbones and settings above match them. Verdicts are computed "
    "from paired per-seed differences and their 95 % Student-t intervals, as in the small-scale build."
)
CLAIMS_TITLE = "## Claims at a glance"
PRECONDITION = "pretraining_gain"


def build_sections(ctx: ReportContext, sections: Mapping[str, Mapping[str, Any] | None]) -> list[SectionOutput]:
    """Render every section named in ``sections`` (name -> its options) in that order."""
    return [create_section(name, options).render(ctx) for name, options in sections.items()]


def render_readme(ctx: ReportContext, outputs: list[SectionOutput]) -> str:
    """The text of reports/README.md from rendered sections."""
    parts = [_header(ctx), claims_summary([f for out in outputs for f in out.findings])]
    parts += [out.markdown for out in outputs]
    return "\n\n".join(parts).rstrip() + "\n"


def claims_summary(findings: list[Finding]) -> str:
    """The verdict counts and one line per checked claim of the papers (preconditions counted apart)."""
    claims = [f for f in findings if f.section != PRECONDITION]
    preconditions = [f for f in findings if f.section == PRECONDITION]
    lines = [CLAIMS_TITLE]
    if preconditions:
        passed = sum(f.verdict == "supported" for f in preconditions)
        lines.append(f"Pretraining beats the random-init backbone in {passed} of {len(preconditions)} "
                     "cells x protocols (section \"Does SSL pretraining beat random init?\").")
    if not claims:
        lines.append("No claim of the papers could be checked in this build.")
        return "\n\n".join(lines)
    counts = pd.Series([f.verdict for f in claims]).value_counts()
    lines.append("Verdicts over " + f"{len(claims)} checked claims: " + ", ".join(
        f"{int(counts.get(v, 0))} {v}" for v in ALL_VERDICTS) + ".")
    table = pd.DataFrame({"claim": [f.claim for f in claims], "cells": [f.subject for f in claims],
                          "verdict": [f"**{f.verdict}**" for f in claims],
                          "evidence": [f.evidence() for f in claims]})
    lines.append(markdown_table(table, index=False))
    return "\n\n".join(lines)


def findings_frame(outputs: list[SectionOutput]) -> pd.DataFrame:
    """Every finding as one CSV row: section, claim, cells, verdict, paired difference with its interval
    in the finding's unit (pp for accuracies), seeds."""
    rows = [{"section": f.section, "claim": f.claim, "cells": f.subject, "verdict": f.verdict,
             "difference": f.scale * f.difference.mean if f.difference else None,
             "low": f.scale * f.difference.low if f.difference else None,
             "high": f.scale * f.difference.high if f.difference else None,
             "unit": f.unit, "n_seeds": f.difference.n if f.difference else None, "detail": f.detail}
            for out in outputs for f in out.findings]
    return pd.DataFrame(rows, columns=["section", "claim", "cells", "verdict", "difference", "low", "high", "unit",
                                       "n_seeds", "detail"])


def write_report(results_dir: Path | str, out_dir: Path | str, sections: Mapping[str, Mapping[str, Any] | None],
                 context: Mapping[str, Any]) -> dict[str, Path]:
    """Load the results; write README.md and, in ``FOLDER``, claims.csv and each section's CSV and figures.

    ``context``: ``profile``, ``dataset`` (downstream dataset the tables show); optional ``settings``,
    ``theory`` (Markdown), ``paper`` (paper numbers; default the packaged ones), ``weight_distances``
    (the folder of the weight_distance stages' outputs), ``graphs`` (the folder of the graph stages'
    outputs), ``models`` and ``strategies`` (params.yaml's entries, which sections quote to say what
    ran). Returns written paths.
    """
    distances = context.get("weight_distances")
    graphs = context.get("graphs")
    ctx = ReportContext(results=load_results(results_dir), profile=context["profile"], dataset=context["dataset"],
                        paper=context.get("paper") or load_paper_numbers(), settings=context.get("settings") or {},
                        theory=context.get("theory"),
                        weight_distances=load_weight_distances(distances) if distances is not None else None,
                        graphs=load_graph_stats(graphs) if graphs is not None else {},
                        models=context.get("models") or {}, strategies=context.get("strategies") or {})
    outputs = build_sections(ctx, sections)
    folder = Path(out_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for out in outputs:
        if out.data is not None:
            written[f"{out.name}.csv"] = _write_csv(out.data, folder / f"{out.name}.csv")
        for name, draw in out.figures.items():
            written[name] = draw(folder / name)
    written["claims.csv"] = _write_csv(findings_frame(outputs), folder / "claims.csv")
    out_dir = Path(out_dir)
    written["readme"] = out_dir / "README.md"
    written["readme"].write_text(render_readme(ctx, outputs))
    return written


def _write_csv(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False, float_format="%.4f")
    return path


def _header(ctx: ReportContext) -> str:
    lines = [
        "# Distributed SSL under non-IID data: the papers' tables at this build's scale",
        f"Profile **{ctx.profile}**, downstream dataset **{dataset_name(ctx.dataset)}**; built from "
        f"{len(ctx.results)} evaluation result files.",
    ]
    if ctx.settings:
        table = pd.DataFrame({"setting": list(ctx.settings),
                              "this build": [_setting_text(v) for v in ctx.settings.values()]})
        lines.append(markdown_table(table, index=False))
    lines.append(PAPER_SCALE_NOTE if ctx.profile == "paper" else SCALE_NOTE)
    return "\n\n".join(lines)


def _setting_text(value: Any) -> str:
    if isinstance(value, (list, tuple, set)):
        return ", ".join(str(v) for v in value)
    return str(value)


# -- the project README's "Expected results" block, copied from a generated report ------------------

BLOCK_START = "<!-- expected-results:start (written by `dssl readme sync` from reports/README.md) -->"
BLOCK_END = "<!-- expected-results:end -->"
EXPECTED_SECTIONS = ("Claims at a glance", "Table 1")   # heading prefixes of the report's sections


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


def sync_readme(readme: Path, report: Path, check: bool = False) -> bool:
    """Replace the README's expected-results block by the report's; True when it changed (or would)."""
    readme, report = Path(readme), Path(report)
    if not report.is_file():
        raise FileNotFoundError(f"{report}: no generated report; run `make repro` first")
    text = readme.read_text()
    if text.count(BLOCK_START) != 1 or text.count(BLOCK_END) != 1 or text.index(BLOCK_START) > text.index(BLOCK_END):
        raise ValueError(f"{readme}: needs exactly one block between {BLOCK_START!r} and {BLOCK_END!r}")
    head, rest = text.split(BLOCK_START)
    _, tail = rest.split(BLOCK_END)
    block = expected_results_block(report.read_text()).replace("](sections/", "](reports/sections/")
    new = f"{head}{BLOCK_START}\n{block}\n{BLOCK_END}{tail}"
    if new != text and not check:
        readme.write_text(new)
    return new != text

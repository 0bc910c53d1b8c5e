"""Sections without measured cells: the theory text the theory stage wrote, the partition heatmaps and
graph drawings of the partitions and graphs stages, and how to trace a number."""

from __future__ import annotations

import re

import pandas as pd

from dssl.reporting.claims import Finding
from dssl.reporting.sections.base import ReportContext, ReportSection, register_section
from dssl.reporting.tables import markdown_table

FIGURE_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+\.png)\)")
PER_ROW = 3   # drawings side by side in the partitions-and-graphs tables


@register_section("theory")
class Theory(ReportSection):
    """Paper A's linear-model theory: the summary the ``theory`` stage wrote (reports/theory/summary.md)."""

    title = "Theory"

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        text = (ctx.theory or "").strip()
        return pd.DataFrame({"text": [text]}) if text else pd.DataFrame()

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        """The summary, then the figures it links to, shown."""
        text = data.iloc[0]["text"]
        shown = [f"![{name}]({path})" for name, path in dict.fromkeys(FIGURE_LINK.findall(text))]
        return "\n\n".join([text, *shown])

    def csv(self, data: pd.DataFrame) -> None:  # type: ignore[override]
        return None   # the theory stage writes its own tables

    def empty_text(self) -> str:
        return "_No theory summary in this build (the theory stage did not run)._"


@register_section("partitions_and_graphs")
class PartitionsAndGraphs(ReportSection):
    """The partitions stage's heatmaps (clients x classes) and the graphs stages' drawings, as
    ``ReportContext.data_figures`` lists them (kind -> name -> (path, caption))."""

    title = "Partitions and communication graphs"

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        rows = [{"kind": kind, "name": name, "path": path, "caption": caption}
                for kind, figures in ctx.data_figures.items() for name, (path, caption) in figures.items()]
        return pd.DataFrame(rows)

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        parts = [f"Drawn by the stages that build them (profile {ctx.profile}; each partition and graph has the "
                 "seed params.yaml gives it, the same for every training seed)."]
        for kind, group in data.groupby("kind", sort=False):
            parts.append(f"**{kind.capitalize()}**")
            for start in range(0, len(group), PER_ROW):
                chunk = group.iloc[start:start + PER_ROW]
                parts.append(markdown_table(pd.DataFrame(
                    [[f"![{r.name}]({r.path})" for r in chunk.itertuples()]],
                    columns=[f"`{r.name}`: {r.caption}" for r in chunk.itertuples()]), index=False))
        return "\n\n".join(parts)

    def csv(self, data: pd.DataFrame) -> None:  # type: ignore[override]
        return None

    def empty_text(self) -> str:
        return "_No partition or graph drawings in this build._"


def hardware_sentence(labels: pd.Series) -> str:
    """Which machines evaluated the results: same seeds give the same bits only on the same CPU kernels."""
    counts = labels.fillna("not recorded").value_counts()
    listed = "; ".join(f"{label} ({count} file{'s' * (count != 1)})" for label, count in counts.items())
    if len(counts) == 1:
        return (f"Evaluated on {counts.index[0]}; each run's MLflow tags hold the hardware of its stage. The same "
                "seeds give other bits on another kind of CPU: MKL, oneDNN and torch pick their kernels per CPU "
                "(an Intel Xeon and an AMD EPYC, both AVX512, were measured to differ).")
    return (f"**The results come from {len(counts)} machines**: {listed}. Runs on CPUs whose kernels round "
            "differently are not bit-identical, so differences between such cells include the hardware's.")


@register_section("lineage")
class Lineage(ReportSection):
    """Where each number comes from: the CSVs' ``runs`` column and the ``dssl lineage`` command."""

    title = "Lineage"

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        runs = ctx.results[["stage", "seed", "run_name", "hardware"]]
        return runs if not runs.empty else pd.DataFrame()

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        return (
            f"Every number above is a mean over result files of evaluate stages ({len(data)} files from "
            f"{data['stage'].nunique()} stages here). Each result file is one MLflow run in the project's "
            "tracking store, with its lineage (git commit, params hash, hashes of its inputs and of the file), "
            "named after the file: `<stage>/seed-<s>/<dataset>-<protocol>` with the tag `stage`. Each table's "
            "CSV lists, per cell, the runs behind it (\"seed s: <stage> (<MLflow run name>)\"); `dssl lineage` "
            "finds them. " + hardware_sentence(data["hardware"]))

    def csv(self, data: pd.DataFrame) -> None:  # type: ignore[override]
        return None

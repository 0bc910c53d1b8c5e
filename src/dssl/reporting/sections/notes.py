"""Sections without measured cells: the theory text the theory stage wrote, and how to trace a number."""

from __future__ import annotations

import pandas as pd

from dssl.reporting.claims import Finding
from dssl.reporting.sections.base import ReportContext, ReportSection, register_section


@register_section("theory")
class Theory(ReportSection):
    """Paper A's linear-model theory: the summary the ``theory`` stage wrote (reports/theory/summary.md)."""

    title = "Theory"

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        text = (ctx.theory or "").strip()
        return pd.DataFrame({"text": [text]}) if text else pd.DataFrame()

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        return data.iloc[0]["text"]

    def csv(self, data: pd.DataFrame) -> None:  # type: ignore[override]
        return None   # the theory stage writes its own tables

    def empty_text(self) -> str:
        return "_No theory summary in this build (the theory stage did not run)._"


@register_section("lineage")
class Lineage(ReportSection):
    """Where each number comes from: the CSVs' ``runs`` column and the ``dssl lineage`` command."""

    title = "Lineage"

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        runs = ctx.results[["stage", "seed", "mlflow_run_id"]]
        return runs if not runs.empty else pd.DataFrame()

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        logged = int(data["mlflow_run_id"].notna().sum())
        return (
            f"Every number above is a mean over result files of evaluate stages ({len(data)} files from "
            f"{data['stage'].nunique()} stages here; {logged} with their MLflow run id). Each stage run is "
            "one MLflow run per seed in the project's tracking store, with its lineage (git commit, params "
            "hash, hashes of its inputs). Each table's CSV lists, per cell, the runs behind it "
            "(\"seed s: <stage> (<MLflow run id>)\").")

    def csv(self, data: pd.DataFrame) -> None:  # type: ignore[override]
        return None

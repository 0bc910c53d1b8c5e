"""Does SSL pretraining beat the same backbone from random init? The precondition of every claim.

For each pretrained cell (model x framework x partition or graph) and each evaluation protocol, the
paired per-seed difference to the random-init backbone (same backbone, downstream dataset, protocol and
seed; ``claims.PretrainingGate``). A pretraining that does not beat random init has learned nothing the
protocol can use, so the other sections call claims resting on it untestable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pandas as pd

from dssl.reporting.claims import RANDOM, UNTESTABLE, Finding, PretrainingGate
from dssl.reporting.results import accuracy_summary
from dssl.reporting.sections.base import FIGURES, ReportContext, ReportSection, check_protocols, register_section
from dssl.reporting.stats import verdict
from dssl.reporting.tables import (
    CELL_NOTE, FRAMEWORK_ORDER, cell_name, compared_cells, evaluation_name, format_summary, index_in, markdown_table,
)

CLAIM = "pretraining beats the random-init backbone (precondition of every claim)"
CELL = ["model", "framework", "setting", "strategy", "dataset", "protocol"]


def _setting(run: Any) -> str:
    if run.framework == "fl":
        return run.partition
    if run.framework == "local":   # the stand-alone clients of a partition, scored as their mean
        return f"{run.partition} (each client alone)"
    if run.framework == "decl":
        return f"{run.graph} ({run.partition})"
    return "-"


@register_section("pretraining_gain")
class PretrainingGain(ReportSection):
    """Pretrained minus random init, per cell and protocol (``protocols``: which; default all)."""

    title = "Does SSL pretraining beat random init?"

    def __init__(self, protocols: list[str] | None = None) -> None:
        check_protocols(protocols or [])
        self.protocols = protocols

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        results = ctx.results
        if self.protocols is not None:
            results = results[results["protocol"].isin(self.protocols)]
        ssl = results[results["framework"] != RANDOM]
        if ssl.empty:
            return pd.DataFrame()
        ssl = ssl.assign(setting=[_setting(r) for r in ssl.itertuples()],
                         strategy=ssl["strategy"].where(ssl["strategy"].notna(), "-"))
        gate = PretrainingGate(ctx.results)
        rows = [self._row(key, cell, gate) for key, cell in ssl.groupby(CELL, sort=False, dropna=False)]
        table = pd.DataFrame(rows)
        order = table["framework"].map(lambda f: index_in(FRAMEWORK_ORDER, f))
        return table.iloc[order.argsort(kind="stable")].reset_index(drop=True)

    def _row(self, key: tuple, cell: pd.DataFrame, gate: PretrainingGate) -> dict[str, Any]:
        pretrained = accuracy_summary(cell)
        baseline = gate.baseline(cell)
        random = accuracy_summary(baseline) if not baseline.empty else None
        result = gate.check(cell)
        margin = result.margin
        return {
            **dict(zip(CELL, key)),
            "cell": cell_name(cell.iloc[0]), "scored": evaluation_name(cell.iloc[0]),
            "reference": cell_name(baseline.iloc[0]) if not baseline.empty else "",
            "compared": compared_cells(cell, baseline),
            "pretrained": pretrained, "random": random,
            "gain": 100 * margin.mean if margin else float("nan"),
            "gain_low": 100 * margin.low if margin else float("nan"),
            "gain_high": 100 * margin.high if margin else float("nan"),
            "beats_random": result.passed, "reason": result.reason, "interval": margin,
            "runs": pretrained["runs"],
        }

    def findings(self, data: pd.DataFrame, ctx: ReportContext) -> list[Finding]:
        found = []
        for row in data.itertuples():
            outcome = self._verdict(row)
            found.append(Finding(self.name, CLAIM, f"{row.scored}: {row.cell}", outcome, row.interval,
                                 "pretrained - random init" if row.interval is not None else row.reason,
                                 cells=row.compared))
        return found

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        table = pd.DataFrame({
            "cell (framework/model/partition or graph/strategy)": data["cell"], "scored": data["scored"],
            "pretrained (%)": [format_summary(s) for s in data["pretrained"]],
            "random init (%)": [f"{format_summary(s)}: {ref}" if s else "" for s, ref in zip(data["random"],
                                                                                              data["reference"])],
            "gain (pp, 95 % CI)": [f.evidence().split(": ", 1)[-1] for f in findings],
            "verdict": [f.verdict for f in findings]})
        passed = data[data["beats_random"]]
        summary = (f"Pretraining beats random init (whole 95 % interval of the paired gain above 0) in "
                   f"{len(passed)} of {len(data)} cells x protocols.")
        by_protocol = data.groupby("protocol")["beats_random"].agg(["sum", "count"])
        summary += " Per protocol: " + ", ".join(f"{p} {int(r['sum'])}/{int(r['count'])}"
                                                 for p, r in by_protocol.iterrows()) + "."
        return "\n\n".join([
            f"![Pretrained minus random init, every cell and protocol]({FIGURES}/pretraining_gain.png)",
            f"Accuracy in %: {CELL_NOTE}. Gain = pretrained minus the same backbone from random init, paired "
            "by seed, with its 95 % Student-t interval; \"supported\" means the whole interval is above 0.",
            markdown_table(table, index=False), summary])

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        """The gains as a forest plot: one row per cell, grouped by how it was scored."""
        from dssl.reporting.figures import forest

        rows = pd.DataFrame({"group": data["scored"], "label": data["cell"],
                             "verdict": [self._verdict(r) for r in data.itertuples()],
                             "difference": data["gain"], "low": data["gain_low"], "high": data["gain_high"],
                             "reason": [("untestable: " + r) if r != "beats random init" and not b else ""
                                        for r, b in zip(data["reason"], data["gain"].notna())],
                             "unit": "pp"})
        title = ("Does SSL pretraining beat random init? Every cell (framework/model/partition or graph/strategy) "
                 "against the same backbone from random init")
        note = ctx.note("protocol and dataset per group") + " · pretrained - random init, paired by seed"
        return {"pretraining_gain.png": lambda path: forest(rows, path, title,
                                                            "gain ({unit}); bar: 95 % interval over seeds", note)}

    @staticmethod
    def _verdict(row: Any) -> str:
        return verdict(row.interval, +1) if row.interval is not None else UNTESTABLE

    def csv(self, data: pd.DataFrame) -> pd.DataFrame:
        out = data.drop(columns=["pretrained", "random", "interval", "runs", "compared"])
        return out.assign(
            pretrained_mean=[s["mean"] for s in data["pretrained"]],
            pretrained_ci=[s["ci"] for s in data["pretrained"]],
            random_mean=[s["mean"] if s else float("nan") for s in data["random"]],
            random_ci=[s["ci"] if s else float("nan") for s in data["random"]],
            n=[s["n"] for s in data["pretrained"]])

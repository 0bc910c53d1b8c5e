"""Accuracy against FL rounds, beside the random-init backbone: when (if ever) does pretraining pay off?

Not a table of either paper: a measured finding of this build. At the embedded scale a model's claims
are testable only where its pretraining beats the same backbone from random init (``pretraining_gain``),
and some models never do within the rounds the default affords (MAE + CNN on the digits, on every
protocol and recipe tried: docs/evidence.md). The curve shows that as accuracy against rounds rather than
as "untestable": one line per model, one panel per protocol, the random-init backbone's accuracy as a
dashed line, and per model and protocol the fewest rounds at which the whole 95 % interval of the paired
gain lies above 0.

The points are FL cells of one partition that differ only in how many rounds they trained: the strategy
entries named in ``strategies`` (e.g. ``fedavg-r10``, ``fedavg-r20``, ``fedavg-r40`` and ``fedavg``, the
same rule stopped after 10, 20, 40 and 60 rounds). Each point's rounds are read from its models'
history (the ``rounds`` of its results), not from the entry's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from dssl.reporting.claims import Finding, PretrainingGate
from dssl.reporting.results import accuracy_summary
from dssl.reporting.sections.base import FIGURES, ReportContext, ReportSection, check_protocols, register_section
from dssl.reporting.tables import CELL_NOTE, cell_name, format_summary, markdown_table, row_label


@register_section("learning_curve")
class LearningCurve(ReportSection):
    """``models`` on ``partition`` (FL), one point per strategy entry of ``strategies``, read on each of
    ``protocols`` (default: every protocol the cells were scored with)."""

    title = "Learning curves: accuracy against FL rounds, beside random init"

    def __init__(self, models: Sequence[str], strategies: Sequence[str], partition: str = "fl-iid",
                 protocols: Sequence[str] | None = None) -> None:
        if not models:
            raise ValueError("models must name at least one model")
        if len(strategies) < 2:
            raise ValueError("a curve needs at least two strategy entries (the same rule stopped after "
                             "different rounds)")
        check_protocols(protocols or [])
        self.models, self.strategies, self.partition = list(models), list(strategies), partition
        self.protocols = list(protocols) if protocols is not None else None

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        results = ctx.results
        cells = results[(results["framework"] == "fl") & results["model"].isin(self.models)
                        & results["strategy"].isin(self.strategies) & (results["partition"] == self.partition)
                        & (results["dataset"] == ctx.dataset)]   # a point reads one downstream dataset
        if self.protocols is not None:
            cells = cells[cells["protocol"].isin(self.protocols)]
        if cells.empty:
            return pd.DataFrame()
        gate = PretrainingGate(results)
        rows = [self._point(key, cell, gate)
                for key, cell in cells.groupby(["model", "protocol", "strategy"], sort=False)]
        table = pd.DataFrame(rows).assign(order=lambda t: t["model"].map(self.models.index))
        table = table.sort_values(["order", "protocol", "rounds"]).drop(columns="order")
        return table.reset_index(drop=True)

    def _point(self, key: tuple, cell: pd.DataFrame, gate: PretrainingGate) -> dict[str, Any]:
        model, protocol, strategy = key
        rounds = cell["rounds"].dropna().unique()
        if len(rounds) != 1:
            raise ValueError(f"learning_curve: the results of {cell_name(cell.iloc[0])} ({protocol}) do not record "
                             f"one number of rounds (found {sorted(rounds)}); re-run its evaluate_fl stage")
        first = cell.iloc[0]
        baseline = gate.baseline(cell)
        result = gate.check(cell)
        return {"model": model, "label": row_label(first["method"], first["family"]), "protocol": protocol,
                "strategy": strategy, "rounds": int(rounds[0]), "cell": cell_name(first),
                "pretrained": accuracy_summary(cell),
                "random": accuracy_summary(baseline) if not baseline.empty else None,
                "margin": result.margin, "beats_random": result.passed, "reason": result.reason}

    def findings(self, data: pd.DataFrame, ctx: ReportContext) -> list[Finding]:
        return []   # a measured finding, not a claim of either paper: the pretraining_gain section gates each point

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        table = pd.DataFrame({
            "model": data["label"] + " (" + data["model"] + ")", "scored": data["protocol"],
            "rounds": data["rounds"], "cell": data["cell"],
            "pretrained (%)": [format_summary(s) for s in data["pretrained"]],
            "random init (%)": [format_summary(s) if s else "" for s in data["random"]],
            "gain (pp, 95 % CI)": [_gain_text(m) for m in data["margin"]],
            "beats random init": ["yes" if b else "no" for b in data["beats_random"]]})
        return "\n\n".join([
            f"![accuracy against FL rounds]({FIGURES}/learning_curve.png)",
            f"FL on `{self.partition}`; each point is the same rule stopped after that many rounds (strategy "
            f"entries {', '.join(f'`{s}`' for s in self.strategies)}). Accuracy in %: {CELL_NOTE}. Gain = "
            "pretrained minus the same backbone from random init, paired by seed. A measured finding of this "
            "build, not a claim of either paper.",
            "\n".join(f"- {line}" for line in self._onsets(data)),
            markdown_table(table, index=False)])

    def _onsets(self, data: pd.DataFrame) -> list[str]:
        """Per model and protocol: the fewest rounds from which every later point beats random init."""
        lines = []
        for (label, model, protocol), curve in data.groupby(["label", "model", "protocol"], sort=False):
            passed, rounds = list(curve["beats_random"]), [int(r) for r in curve["rounds"]]
            name = f"{label} ({model}), {protocol}"
            if not any(passed):
                lines.append(f"{name}: does not beat random init at any depth up to {rounds[-1]} rounds")
            elif passed[-1]:
                onset = next(i for i in range(len(passed)) if all(passed[i:]))
                lines.append(f"{name}: beats random init from {rounds[onset]} rounds on")
            else:
                at = ", ".join(str(r) for r, p in zip(rounds, passed) if p)
                lines.append(f"{name}: beats random init after {at} rounds, but not after {rounds[-1]}")
        return lines

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        from dssl.reporting.figures import curve_panels

        points = pd.DataFrame({"panel": data["protocol"], "line": data["label"], "x": data["rounds"],
                               "mean": [s["mean"] for s in data["pretrained"]],
                               "ci": [s["ci"] for s in data["pretrained"]],
                               "reference": [s["mean"] if s else float("nan") for s in data["random"]]})
        title = f"Accuracy against FL rounds on {self.partition}; dashed: the same backbone from random init"
        note = ctx.note("protocol per panel") + " · bars: 95 % seed interval"
        return {"learning_curve.png": lambda path: curve_panels(points, path, "FL rounds", "accuracy (%)", title,
                                                                note)}

    def csv(self, data: pd.DataFrame) -> pd.DataFrame:
        return data.drop(columns=["pretrained", "random", "margin"]).assign(
            pretrained_mean=[s["mean"] for s in data["pretrained"]],
            pretrained_ci=[s["ci"] for s in data["pretrained"]],
            random_mean=[s["mean"] if s else float("nan") for s in data["random"]],
            gain=[100 * m.mean if m else float("nan") for m in data["margin"]],
            gain_low=[100 * m.low if m else float("nan") for m in data["margin"]],
            gain_high=[100 * m.high if m else float("nan") for m in data["margin"]])


def _gain_text(margin: Any) -> str:
    """The paired gain in pp with its interval, as ``Finding.evidence`` words one (a single seed has none)."""
    if margin is None:
        return ""
    if not margin.defined:
        return f"{100 * margin.mean:+.1f} (one seed, no interval)"
    return f"{100 * margin.mean:+.1f} [{100 * margin.low:+.1f}, {100 * margin.high:+.1f}]"

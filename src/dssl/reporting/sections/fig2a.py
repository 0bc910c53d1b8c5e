"""Paper A's Fig. 2a: DecL accuracy against average connectivity |A|, with FL as the reference.

Paper A (FedMAR, ICLR 2026), Fig. 2a: 20 clients, |A| in {3, 5, 10, 20 (= FL)}, uniform and general
topologies, CIFAR-100 fine-tuning; its values are given only in the figure, so none are printed here.
Claims checked per topology (paired by seed, gated on pretraining beating random init):
1. accuracy rises with |A|: the largest-|A| point minus the smallest-|A| point > 0;
2. FL is never below DecL: FL (the complete graph) minus each DecL point >= 0 -- contradicted when some
   point is above FL beyond its interval, supported when FL is above every point beyond its interval.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Callable

import pandas as pd
from scipy.stats import spearmanr

from dssl.reporting.claims import UNTESTABLE, Finding, PretrainingGate, compare
from dssl.reporting.figures import FL_LABEL, TOPOLOGIES, fig2a_runs, figure2a
from dssl.reporting.results import summarise
from dssl.reporting.sections.base import (FIGURES, ReportContext, ReportSection, check_protocols, register_section,
                                           unevaluated)
from dssl.reporting.stats import CONTRADICTED, INCONCLUSIVE, SUPPORTED
from dssl.reporting.tables import CELL_NOTE, cell_name, compared_cells, dataset_name, format_summary, markdown_table

CLAIM_RISE = "DecL accuracy rises with the average connectivity |A| (paper A, Fig. 2a)"
CLAIM_FL = "FL is never below DecL (paper A, Fig. 2a)"
POINT = ["topology", "connectivity", "graph"]


@register_section("fig2a")
class Fig2a(ReportSection):
    """Fig. 2a for one pretrained DecL model and partition (options select them when several ran) under
    one strategy entry (``strategy``: paper A's plain DecL, Alg. 2 with uniform mixing)."""

    title = "Fig. 2a: DecL accuracy against connectivity"

    def __init__(self, protocol: str = "finetune", model: str | None = None, partition: str | None = None,
                 strategy: str = "decl-uniform") -> None:
        check_protocols([protocol])
        self.protocol, self.model, self.partition, self.strategy = protocol, model, partition, strategy

    def read_problems(self, params: dict) -> list[str]:
        """DecL cells of the figure's model and strategy whose evaluation does not run its protocol on the
        report's dataset (``base.unevaluated``)."""
        from dssl.config.grids import grid_cells

        dataset = str((params.get("report") or {}).get("dataset", ""))
        return [why for cell in grid_cells(params, "decl")
                if cell[2] == self.strategy and self.model in (None, cell[0])
                and (why := unevaluated(params, "decl", cell, dataset, self.protocol))]

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        try:
            self._runs, self._selection = fig2a_runs(ctx.results, ctx.dataset, self.model, self.partition,
                                                     self.protocol, self.strategy)
        except ValueError as err:
            if "no DecL" in str(err):
                return pd.DataFrame()
            raise
        return summarise(self._runs, POINT).sort_values(["topology", "connectivity"], kind="stable")

    def findings(self, data: pd.DataFrame, ctx: ReportContext) -> list[Finding]:
        gate = PretrainingGate(ctx.results)
        cells = {graph: group for graph, group in self._runs.groupby("graph", sort=False)}
        complete = self._runs[self._runs["topology"] == "complete"]
        found = []
        for topology in TOPOLOGIES:
            points = data[data["topology"] == topology].sort_values("connectivity")
            if len(points) >= 2:
                found.append(self._rise(topology, points, cells, gate))
            if len(points) and not complete.empty:
                found.append(self._fl_not_below(topology, points, cells, complete, gate))
        return found

    def _rise(self, topology: str, points: pd.DataFrame, cells: dict, gate: PretrainingGate) -> Finding:
        low, high = points.iloc[0], points.iloc[-1]
        subject = f"{topology} topology, |A| {low['connectivity']:g} -> {high['connectivity']:g}"
        named = compared_cells(cells[high["graph"]], cells[low["graph"]])
        arms = {high["graph"]: cells[high["graph"]]}   # the claim's higher arm: the most connected graph
        blocked = gate.untestable(arms)
        if blocked:
            return Finding(self.name, CLAIM_RISE, subject, UNTESTABLE, None, blocked, cells=named, gated=tuple(arms))
        diff, outcome = compare(cells[high["graph"]], cells[low["graph"]], +1)
        rho = _spearman(list(points["connectivity"]), list(points["mean"]))
        return Finding(self.name, CLAIM_RISE, subject, outcome, diff,
                       f"largest - smallest |A| (Spearman rho of the means {rho})", cells=named, gated=tuple(arms))

    def _fl_not_below(self, topology: str, points: pd.DataFrame, cells: dict, complete: pd.DataFrame,
                      gate: PretrainingGate) -> Finding:
        subject = f"{topology} topology, FL vs every |A|"
        named = compared_cells(complete, *(cells[g] for g in points["graph"]))
        arms = {FL_LABEL: complete}   # the claim's higher arm
        blocked = gate.untestable(arms)
        if blocked:
            return Finding(self.name, CLAIM_FL, subject, UNTESTABLE, None, blocked, cells=named, gated=tuple(arms))
        compared = [(graph, *compare(complete, cells[graph], +1)) for graph in points["graph"]]
        outcomes = [outcome for _, _, outcome in compared]
        overall = (CONTRADICTED if CONTRADICTED in outcomes
                   else SUPPORTED if all(o == SUPPORTED for o in outcomes) else INCONCLUSIVE)
        graph, diff, _ = min(compared, key=lambda c: c[1].mean)
        return Finding(self.name, CLAIM_FL, subject, overall, diff, f"FL - {graph} (the closest DecL point)",
                       cells=named, gated=tuple(arms))

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        selection = self._selection
        table = pd.DataFrame({
            "topology": data["topology"], "|A|": [f"{c:g}" for c in data["connectivity"]],
            "cell": [cell_name(self._runs[self._runs["graph"] == g].iloc[0]) for g in data["graph"]],
            "accuracy (%)": [format_summary(r) for r in data.itertuples()]})
        return "\n\n".join([
            f"![Fig. 2a: DecL accuracy against |A|]({FIGURES}/fig2a.png)",
            f"DecL {self.protocol} accuracy on {dataset_name(selection['dataset'])} for {selection['model']} "
            f"pretrained with strategy {self.strategy} on partition {selection['partition']}, "
            "against the average connectivity |A| (self "
            f"included): {CELL_NOTE}. Paper A gives its values only in the figure. The FL reference is the "
            f"DecL run on the complete graph (\"{FL_LABEL}\"): uniform mixing over all clients equals FedAvg "
            "with every client taking part and uniform weights.",
            markdown_table(table, index=False),
            "**Claim check** (paired by seed; tested only where the pretraining of the arm a claim says is "
            "higher, its gated arm, beats its random-init backbone)\n\n" + "\n".join(
                f.line(with_claim=True) for f in findings),
        ])

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        selection = self._selection
        note = ctx.note(f"{self.protocol} on {selection['dataset']}") + " · bars and band: 95 % seed interval"
        return {"fig2a.png": lambda path: figure2a(
            ctx.results, path, selection["dataset"], selection["model"], selection["partition"], self.protocol,
            self.strategy, note)}

    def empty_text(self) -> str:
        return f"No DecL {self.protocol} results of strategy {self.strategy!r} in this build."


def _spearman(x: list[float], y: list[float]) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: rho is undefined
        rho = float(spearmanr(x, y).statistic)
    return "n/a" if math.isnan(rho) else f"{rho:.2f}"

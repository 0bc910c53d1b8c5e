"""Paper A's Table 6: DecL consensus rules against the FL reference, with each rule's distance from
uniform mixing on the table's graphs."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from dssl.reporting.sections.base import ReportContext, register_section
from dssl.reporting.sections.strategy_comparison import StrategyComparison
from dssl.topology.mixing import DEFAULT_RULE


@register_section("table6")
class Table6(StrategyComparison):
    """Paper A Table 6: DecL consensus rules at two connectivities, with the FL reference."""

    title = "Table 6: DecL consensus rules"
    paper_key = "table6_consensus"
    best_row = "fl_reference"
    claim = "FL is above DecL under every consensus rule (paper A, Table 6)"
    intro = ("Paper A's Table 6 trains decentralized MIM with four consensus rules; its values differ by at most "
             "1.4 pp between rules, and FL is above all of them.")

    def __init__(self, model: str, rows: Mapping[str, Any], columns: Mapping[str, Any], framework: str = "decl",
                 protocol: str = "finetune", best: str | None = None, dataset: str | None = None) -> None:
        super().__init__(model, rows, columns, framework, protocol, best, dataset=dataset)

    def choices(self, data: pd.DataFrame, ctx: ReportContext) -> list[str]:
        """Adds, per graph of the table, its degrees and each rule's distance from uniform mixing: on a graph
        whose clients all have the same |A_i| the rules' matrices coincide and the table cannot separate them."""
        return super().choices(data, ctx) + [text for graph in dict.fromkeys(data["place"])
                                             if (text := self.mixing_text(graph, data, ctx))]

    def mixing_text(self, graph: str, data: pd.DataFrame, ctx: ReportContext) -> str:
        stats = ctx.graphs.get(graph)
        if stats is None:
            return ""
        rules = {row: (ctx.strategies.get(strategy) or {}).get("mixing", DEFAULT_RULE)
                 for row, strategy, place in zip(data["row"], data["strategy"], data["place"]) if place == graph}
        distances = [f"{row} ({rule}) {stats[f'distance_to_uniform_{rule}']:.3g}" for row, rule in rules.items()
                     if f"distance_to_uniform_{rule}" in stats]
        same = [row for row, rule in rules.items() if stats.get(f"distance_to_uniform_{rule}", 1.0) < 1e-9]
        text = (f"**Mixing on {graph}**: |A_i| from {stats['connectivity_min']:.0f} to {stats['connectivity_max']:.0f} "
                f"(mean {stats['connectivity_mean']:.2f}); each rule's largest weight difference from uniform mixing "
                f"(1/|A_i|), max_ij |W_ij - U_ij|: " + ", ".join(distances) + ".")
        if same:
            text += (f" {', '.join(same)} mix exactly as uniform weights on this graph: any accuracy gap between "
                     "them is seed and hardware noise.")
        return text

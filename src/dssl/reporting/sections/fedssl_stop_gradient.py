"""Paper B's stop-gradient ablation: a comparison table with a second claim in some columns
(the model without stop-gradient still beats random init)."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from dssl.reporting.claims import UNTESTABLE, Finding, PretrainingGate, compare
from dssl.reporting.sections.base import ReportContext, register_section
from dssl.reporting.sections.strategy_comparison import StrategyComparison
from dssl.reporting.tables import compared_cells


@register_section("fedssl_stop_gradient")
class FedSSLStopGradient(StrategyComparison):
    """Paper B's ablation: stop-gradient is necessary for FedSimSiam, not for FedBYOL.

    Two claims: in the columns of ``works_without`` (BYOL: its EMA target keeps it from collapsing) the
    model trained without stop-gradient still beats its random-init backbone ("works"), paired by seed
    and gated on the model with stop-gradient beating it too; in the other columns (SimSiam) the row
    with stop-gradient is the more accurate.
    """

    note = ("Without stop-gradient follows SimSiam's definition: the loss is differentiated through the target "
            "branch, and BYOL's target, which the gradient reaches, is stepped by the optimiser "
            "(`target_optimized: true`, the default). Paper B's code keeps the target out of its optimiser "
            "(`target_optimized: false`, with the strategy's `first_round_target: online`), which equals the "
            "stop-gradient run after a client's first round.")
    title = "Paper B ablation: stop-gradient"
    best_row = "with stop-gradient"
    claim = "stop-gradient is necessary for FedSimSiam: with it accuracy is higher (paper B)"
    claim_works = "FedBYOL works without stop-gradient: it beats the random-init backbone (paper B)"
    intro = "Paper B finds stop-gradient not always necessary: FedBYOL works without it, FedSimSiam does not."

    def __init__(self, model: str, rows: Mapping[str, Any], columns: Mapping[str, Any], framework: str = "fl",
                 protocol: str = "finetune", works_without: tuple[str, ...] | list[str] = ("BYOL",),
                 dataset: str | None = None) -> None:
        super().__init__(model, rows, columns, framework, protocol, dataset=dataset)
        unknown = sorted(set(works_without) - set(self.columns))
        if unknown:
            raise ValueError(f"works_without names columns {unknown} that are not among {sorted(self.columns)}")
        without = [row for row in self.rows if row != self.best_row]
        if len(without) != 1:
            raise ValueError(f"fedssl_stop_gradient needs two rows, {self.best_row!r} and one without, "
                             f"got {sorted(rows)}")
        self.works_without, self.without_row = tuple(works_without), without[0]

    def compared_rows(self, column: str) -> list[str]:
        """In a ``works_without`` column the row without stop-gradient is read against random init, not paired
        with the row with it."""
        return [] if column in self.works_without else super().compared_rows(column)

    def column_finding(self, column: str, gate: PretrainingGate) -> Finding | None:
        if column not in self.works_without:
            return super().column_finding(column, gate)
        with_sg, without_sg = self._cells.get((self.best_row, column)), self._cells.get((self.without_row, column))
        if with_sg is None or without_sg is None:
            return None
        subject = f"{self.framework.upper()} {column}: {self.without_row} vs random init"
        baseline = gate.baseline(without_sg)
        named = compared_cells(without_sg, baseline)
        gated = (self.best_row,)
        blocked = gate.untestable({self.best_row: with_sg})
        if blocked:
            return Finding(self.name, self.claim_works, subject, UNTESTABLE, None, blocked, cells=named, gated=gated)
        if baseline.empty:
            return Finding(self.name, self.claim_works, subject, UNTESTABLE, None, gate.check(without_sg).reason,
                           cells=named, gated=gated)
        diff, outcome = compare(without_sg, baseline, +1)
        return Finding(self.name, self.claim_works, subject, outcome, diff, f"{self.without_row} - random init",
                       cells=named, gated=gated)

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        return super().markdown(data, findings, ctx).replace(
            f"**Claim check**: {self.claim}", f"**Claim check**: {self.claim}; {self.claim_works}")

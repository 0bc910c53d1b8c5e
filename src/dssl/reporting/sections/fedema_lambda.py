"""Paper B's lambda sweep: FedEMA's accuracy against a constant lambda, a figure without a claim."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from dssl.reporting.claims import Finding
from dssl.reporting.results import accuracy_summary
from dssl.reporting.sections.base import FIGURES, ReportContext, ReportSection, check_protocols, register_section
from dssl.reporting.sections.comparison_text import strategy_text
from dssl.reporting.tables import CELL_NOTE, cell_name, format_summary, markdown_table


@register_section("fedema_lambda")
class FedEMALambda(ReportSection):
    """Paper B's lambda sweep: FedEMA with a constant lambda, accuracy against lambda (a figure).

    ``points``: lambda (as written in params.yaml) -> the strategy entry that runs FedEMA with it, on
    ``model`` and ``partition``. Paper B shows the sweep as a figure without printed values and states no
    ordering to check, so the section draws the measured curve and checks no claim.
    """

    title = "Paper B: FedEMA's accuracy against a constant lambda"

    def __init__(self, model: str, partition: str, points: Mapping[str, str], protocol: str = "linear_probe",
                 framework: str = "fl", dataset: str | None = None) -> None:
        try:
            self.points = {float(value): str(strategy) for value, strategy in points.items()}
        except (TypeError, ValueError) as err:
            raise ValueError(f"points must map lambda values to strategy entries, got {dict(points)}") from err
        if len(self.points) < 2:
            raise ValueError("a sweep needs at least two lambda values")
        check_protocols([protocol])
        self.model, self.partition, self.protocol, self.framework = model, partition, protocol, framework
        self.dataset = dataset   # the one downstream dataset the sweep is read on (default the report's)

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        results = ctx.results
        rows = []
        for value, strategy in self.points.items():
            cell = results[(results["framework"] == self.framework) & (results["model"] == self.model)
                           & (results["strategy"] == strategy) & (results["partition"] == self.partition)
                           & (results["protocol"] == self.protocol)
                           & (results["dataset"] == (self.dataset or ctx.dataset))]
            if not cell.empty:
                rows.append({"x": value, "strategy": strategy, "cell": cell_name(cell.iloc[0]),
                             "dataset": cell.iloc[0]["dataset"], **accuracy_summary(cell)})
        return pd.DataFrame(rows)

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        table = pd.DataFrame({"lambda": data["x"], "cell": data["cell"],
                              "accuracy (%)": [format_summary(r) for r in data.itertuples()]})
        ran = "; ".join(f"{s} = {strategy_text(s, ctx.strategies[s])}" for s in data["strategy"]
                        if s in ctx.strategies)
        return (f"![lambda sweep]({FIGURES}/fedema_lambda.png)\n\n"
                f"Model {self.model} on {self.partition}, scored with {self.protocol}; {CELL_NOTE}. Paper B draws "
                "this sweep without printed values and states no ordering, so no claim is checked here. Lambda "
                "multiplies the divergence each strategy runs with (paper B tuned 0.4-1.6 on its code's per-kernel "
                "norm, `divergence: paper`)" + (f"; what ran: {ran}." if ran else ".") + "\n\n"
                + markdown_table(table, index=False))

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        from dssl.reporting.figures import sweep_figure

        title = f"Paper B: FedEMA with a constant lambda ({self.framework}/{self.model}/{self.partition}/<strategy>)"
        datasets = ", ".join(dict.fromkeys(data["dataset"]))
        note = ctx.note(f"{self.protocol} on {datasets}") + " · bars: 95 % seed interval"
        return {"fedema_lambda.png": lambda path: sweep_figure(data, path, "lambda", f"{self.protocol} accuracy (%)",
                                                               title, note)}

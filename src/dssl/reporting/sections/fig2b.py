"""Paper A's Fig. 2b: MAR against plain MAE across label skew, in FL (``fig2b``) and DecL
(``fig2b_decl``), as a comparison table drawn as accuracy against alpha."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from dssl.reporting.sections.base import ReportContext, register_section
from dssl.reporting.sections.comparison_layout import PLACE
from dssl.reporting.sections.strategy_comparison import StrategyComparison


@register_section("fig2b")
class Fig2b(StrategyComparison):
    """Paper A Fig. 2b: MAR (MAE + gamma * A-MMD) against plain MAE across label skew alpha."""

    title = "Fig. 2b: MAR against MAE across label skew"
    best_row = "MAR"
    claim = "MAR is more accurate than MAE under label non-IID data (paper A, Fig. 2b)"
    intro = ("Paper A's Fig. 2b plots MAR and MAE over alpha (1 to 0.001) in FL and DecL and gives its values "
             "only in the figure. Rows must be labelled MAE and MAR; columns are label-skew partitions.")

    def __init__(self, model: str, rows: Mapping[str, Any], columns: Mapping[str, Any], framework: str = "fl",
                 protocol: str = "finetune", dataset: str | None = None) -> None:
        if set(rows) != {"MAE", "MAR"}:
            raise ValueError(f"fig2b rows must be exactly MAE and MAR, got {sorted(rows)}")
        super().__init__(model, rows, columns, framework, protocol, dataset=dataset)

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        """Accuracy against the label skew alpha of each column's partition, MAE and MAR as lines."""
        from dssl.reporting.figures import IID_ALPHA, alpha_lines

        points = data.assign(alpha=[IID_ALPHA if scheme == "iid" else alpha
                                    for scheme, alpha in zip(data["scheme"], data["alpha"])])
        points = points[points["alpha"].notna()]
        if points.empty:
            return {}
        places = ", ".join(dict.fromkeys(data["place"]))
        title = (f"{self.title} ({self.framework.upper()})\n{self.framework}/{self.model}/<{PLACE[self.framework]}>/"
                 f"<strategy>: MAE = {self.rows['MAE']}, MAR = {self.rows['MAR']}; {places}")
        note = ctx.note(self.scored(ctx)) + " · bars: 95 % seed interval"
        return {f"{self.name}.png": lambda path: alpha_lines(points, path, title, f"{self.protocol} top-1 accuracy (%)",
                                                             note)}


@register_section("fig2b_decl")
class Fig2bDecl(Fig2b):
    """Fig. 2b's DecL panel (columns are graphs on label-skew partitions)."""

    title = "Fig. 2b (DecL): DecMAR against MAE across label skew"

    def __init__(self, model: str, rows: Mapping[str, Any], columns: Mapping[str, Any], framework: str = "decl",
                 protocol: str = "finetune", dataset: str | None = None) -> None:
        super().__init__(model, rows, columns, framework, protocol, dataset)

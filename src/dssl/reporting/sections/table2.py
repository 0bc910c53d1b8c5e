"""Paper A's Table 2: FedMAR against the federated SSL baselines, with each row's model size (the
paper's Params column)."""

from __future__ import annotations

import pandas as pd

from dssl.reporting.claims import Finding, PretrainingGate
from dssl.reporting.results import accuracy_summary
from dssl.reporting.sections.base import ReportContext, register_section
from dssl.reporting.sections.strategy_comparison import StrategyComparison
from dssl.reporting.tables import format_summary, markdown_table


@register_section("table2")
class Table2(StrategyComparison):
    """Paper A Table 2: MAR against the federated SSL baselines (rows labelled with the paper's keys)."""

    note = ("FedU's threshold and FedEMA's constant lambda are read on the norm paper B's code tuned them on: "
            "`divergence: paper` is its ||W_g - W_k|| in that code's mean of per-kernel L2 norms over the encoder's "
            "convolutions (`paper_flat`: one flattened norm, several times larger; `code`: the code's own drift "
            "during the previous local training). A FedEMA client that skipped the previous round restarts from "
            "the global model (`skipped: restart`, paper B's code under client sampling; `blend` blends its stale "
            "model). A baseline whose strategy entry carries `train.optimizer` trains with its authors' recipe.")
    title = "Table 2: FedMAR against federated SSL baselines"
    paper_key = "table2_sota"
    best_row = "fedmar_r18"
    claim = "FedMAR is more accurate than every federated SSL baseline (paper A, Table 2)"
    intro = ("Paper A's Table 2 compares FedMAR with FedU, FedEMA, Orchestra, FeatARC, L-DAWA and FedU2 "
             "(100 clients, alpha 0.1); label rows with its keys (e.g. fedmar_r18, fedema_r18) to print its values.")

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        sizes = self.sizes(data, ctx)
        text = super().markdown(data, findings, ctx) + self.random_init_text(ctx)
        if sizes.empty:
            return text
        return (f"{text}\n\n**Model sizes (this pipeline)**, millions of parameters: the whole pretrained model "
                "(encoder, heads, predictor, target networks: what the paper's Params column counts) and the "
                "encoder the protocols evaluate.\n\n" + markdown_table(sizes))

    def random_init_text(self, ctx: ReportContext) -> str:
        """The rows' backbones from random init, scored as the rows are: paper A runs FedMAR on its Tiny-ViT
        and the baselines on ResNet-18, so the table compares backbones as well as methods, and at a small
        scale the backbones alone can set the order."""
        gate, first_cell = PretrainingGate(ctx.results), {}
        for cell in self._cells.values():   # the random-init runs a cell of each backbone pairs with
            first_cell.setdefault(cell.iloc[0]["backbone"], cell)
        lines = [f"{backbone} {format_summary(accuracy_summary(random))}" for backbone, cell in first_cell.items()
                 if not (random := gate.baseline(cell)).empty]
        if len(lines) < 2:
            return ""
        return ("\n\n**The rows' backbones from random init**, scored as the rows are (the rows train different "
                "backbones, as in the paper; these set how far pretraining must carry each): " + "; ".join(lines) + ".")

    def sizes(self, data: pd.DataFrame, ctx: ReportContext) -> pd.DataFrame:
        """Per row: its model and parameter counts (M), read from the evaluation results."""
        results, rows = ctx.results, []
        for row, framework, model in dict.fromkeys(zip(data["row"], data["framework"], data["model"])):
            runs = results[(results["framework"] == framework) & (results["model"] == model)]
            counts = {key: next((float(v) for v in runs[key] if v is not None and v == v), None)
                      for key in ("method_parameters", "encoder_parameters")}
            if counts["method_parameters"] is None and counts["encoder_parameters"] is None:
                continue
            rows.append({"row": row, "model": model, **{f"{k.split('_')[0]} (M)": "" if v is None else f"{v / 1e6:.3f}"
                                                         for k, v in counts.items()}})
        return pd.DataFrame(rows).set_index("row") if rows else pd.DataFrame()

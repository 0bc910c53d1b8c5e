"""Paper A's Table 5: the weight distance between local-only models and the FL global model.

Paper A (appendix A.3.1, Table 5) trains two local models on the data of clients 1 and 100 alone and a
global model with FL, and reports the sum over layers of the l2 distance between their weights: MIM's
(MAE's, MAR's) models lie closer to each other and to the global model than CL's (SimSiam's). The
``weight_distance`` stages measure it per seed (``pipeline/weight_distance.py``); this section prints
mean +- 95 % seed interval per (pair of models, column) and checks the claim on paired per-seed
differences: for each ``closer`` entry ``A: B``, column A's distance is below column B's, pair by pair.
Distances compare encoder tensors, so only columns on one backbone compare (SimSiam vs MAE on the CNN,
MAE vs MAR on the ViT). A claim is tested only where both columns' FL pretraining beats its random-init
backbone on ``protocol``, or on the model's entry of ``protocols`` (as Table 1 reads that model).
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from dssl.reporting.claims import UNTESTABLE, Finding, PretrainingGate, unpaired_seeds
from dssl.reporting.sections.base import (ReportContext, ReportSection, known_protocols, model_strategy_columns,
                                          register_section)
from dssl.reporting.stats import paired_difference, seed_interval, verdict
from dssl.reporting.tables import markdown_table

CLAIM = "MIM's local and global models lie closer together than CL's; MAR's closer than MAE's (paper A, Table 5)"
PAPER_KEY = "table5_weight_distance"


@register_section("table5")
class Table5(ReportSection):
    """``columns``: label -> ``"<model>:<strategy>"`` (an FL cell on ``partition``); ``closer``: label A ->
    label B where the paper finds A's distances below B's; ``protocols``: model -> the protocol its gate
    reads instead of ``protocol``."""

    title = "Table 5: weight distance between local and global models"

    def __init__(self, columns: Mapping[str, str], partition: str = "fl-label",
                 closer: Mapping[str, str] | None = None, protocol: str = "finetune",
                 protocols: Mapping[str, str] | None = None) -> None:
        self.columns = model_strategy_columns(columns)
        self.closer = dict(closer or {})
        unknown = sorted({*self.closer, *self.closer.values()} - set(self.columns))
        if unknown:
            raise ValueError(f"closer names columns {unknown} that are not among {sorted(self.columns)}")
        self.partition, self.protocol, self.protocols = partition, protocol, known_protocols(protocol, protocols)

    def _distances(self, ctx: ReportContext, label: str) -> pd.DataFrame:
        model, strategy = self.columns[label]
        frame = ctx.weight_distances if ctx.weight_distances is not None else pd.DataFrame(
            columns=["model", "partition", "strategy"])
        return frame[(frame["model"] == model) & (frame["partition"] == self.partition)
                     & (frame["strategy"] == strategy)]

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        rows = []
        for label in self.columns:
            cell = self._distances(ctx, label)
            for pair, group in sorted(cell.groupby("pair", sort=False), key=lambda item: _pair_order(item[0])):
                interval = seed_interval(group["distance"].tolist())
                rows.append({"row": pair, "column": label, "model": self.columns[label][0],
                             "strategy": self.columns[label][1], "partition": self.partition,
                             "mean": interval.mean, "ci": interval.half_width, "n": interval.n,
                             "stages": ", ".join(sorted(set(group["stage"])))})
        return pd.DataFrame(rows)

    def findings(self, data: pd.DataFrame, ctx: ReportContext) -> list[Finding]:
        gate = PretrainingGate(ctx.results)
        found = []
        for near, far in self.closer.items():
            near_cell, far_cell = self._distances(ctx, near), self._distances(ctx, far)
            if near_cell.empty or far_cell.empty:
                continue
            blocked = self._gate(ctx, gate, (near, far))   # distances between models need both to have learned
            gated = (near, far)
            named = f"weight distance: {self._cell(near)} vs {self._cell(far)}"
            for pair in dict.fromkeys(near_cell["pair"]):
                subject = f"{pair}: {near} vs {far}"
                if blocked:
                    found.append(Finding(self.name, CLAIM, subject, UNTESTABLE, None, blocked, cells=named,
                                         gated=gated))
                    continue
                by_seed = {label: dict(zip(c[c["pair"] == pair]["seed"], c[c["pair"] == pair]["distance"]))
                           for label, c in ((near, near_cell), (far, far_cell))}
                unpaired = unpaired_seeds("the columns' distances", [by_seed[near], by_seed[far]])
                if unpaired:
                    found.append(Finding(self.name, CLAIM, subject, UNTESTABLE, None, unpaired, cells=named,
                                         gated=gated))
                    continue
                diff = paired_difference(by_seed[far], by_seed[near])
                found.append(Finding(self.name, CLAIM, subject, verdict(diff, +1), diff, f"{far} - {near}",
                                     unit="l2 distance", cells=named, gated=gated))
        return found

    def _cell(self, label: str) -> str:
        """A column's models: the FL cell's global encoder and the stand-alone clients of its model."""
        model, strategy = self.columns[label]
        return f"fl/{model}/{self.partition}/{strategy} + local/{model}/{self.partition}"

    def _gate(self, ctx: ReportContext, gate: PretrainingGate, labels: tuple[str, ...]) -> str | None:
        results = ctx.results
        cells = {}
        for label in labels:
            model, strategy = self.columns[label]
            protocol = self.protocols.get(model, self.protocol)
            cells[label] = results[(results["framework"] == "fl") & (results["model"] == model)
                                   & (results["strategy"] == strategy) & (results["partition"] == self.partition)
                                   & (results["protocol"] == protocol) & (results["dataset"] == ctx.dataset)]
            if cells[label].empty:
                return f"untestable: no FL {protocol} result of {model} / {strategy} on {self.partition}"
        return gate.untestable(cells)

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        cells = {(r.row, r.column): _distance_text(r.mean, r.ci, r.n) for r in data.itertuples()}
        rows = list(dict.fromkeys(data["row"]))
        measured = pd.DataFrame({f"{label} ({self._cell(label)})": [cells.get((row, label), "") for row in rows]
                                 for label in self.columns},
                                index=pd.Index(rows, name="l2 distance (sum over layers)"))
        parts = [f"Encoder weights of two clients of {self.partition} trained alone (from the FL run's initial "
                 "weights) against each other and against the FL cell's global model; mean ± 95 % interval over "
                 "seeds [n]; each column names its FL cell and stand-alone cell. A client that trains alone has no "
                 "z̄ to align to, so MAR's local models are MAE's and its "
                 "column differs from MAE's through the global model only. Distances of different backbones "
                 "do not compare.", "**Measured (this pipeline)**", markdown_table(measured)]
        paper = ctx.paper.get(PAPER_KEY)
        if paper:
            parts += ["**Paper A, Table 5** (its ViT, pretrained on Mini-ImageNet, 100 clients, alpha 0.1)",
                      markdown_table(pd.DataFrame(paper["rows"], index=paper["columns"]).T.rename_axis("pair"))]
        read_on = self.protocol + "".join(f"; {model} on {name}" for model, name in self.protocols.items())
        parts.append(f"**Claim check**: {CLAIM} (paired by seed; tested only where both FL pretrainings beat "
                     f"random init on {read_on})\n\n"
                     + ("\n".join(f.line() for f in findings)
                        or "- no 'closer' comparison has both columns in this build"))
        return "\n\n".join(parts)

    def empty_text(self) -> str:
        return f"No weight_distance results on {self.partition} in this build."


def _distance_text(mean: float, ci: float, n: int) -> str:
    return f"{mean:.2f} ± {ci:.2f} [{n}]" if ci == ci else f"{mean:.2f} [{n}]"


def _pair_order(pair: str) -> tuple:
    """Paper A's row order: the two local models first, then each against the global model."""
    return ("global" in pair, pair)

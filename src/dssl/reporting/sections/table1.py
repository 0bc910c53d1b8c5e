"""Paper A's Table 1: FL pretraining under IID / label / feature non-IID data, beside the paper.

Paper A (FedMAR, ICLR 2026), Table 1: SimSiam and MAE, each with a CNN and a ViT backbone, pretrained
with FedAvg under IID, label non-IID (Dirichlet) and feature non-IID partitions, then fully fine-tuned;
every non-IID cell prints its drop from the IID cell, e.g. "84.33 (↓1.70)". The measured table adds
reference rows the paper does not have: the random-init backbone and centralised pretraining.

Claims checked (paired by seed, gated on pretraining beating random init):
1. non-IID pretraining lowers accuracy: per (row, non-IID setting), non-IID - IID < 0;
2. MAE is more robust than SimSiam: per (backbone, setting), MAE's change minus SimSiam's > 0, where
   both rows are read on one protocol.

Every row is read on one protocol: ``protocol``, or the model's entry of ``protocols`` where a model's
pretraining shows on another one (declared in params.yaml before the run; the report names each row's).
Every row is one strategy entry: ``strategy`` (paper A's FedAvg), or the model's entry of ``strategies``
where a model's cells train longer (e.g. ``fedavg-r120``: the same rule for 120 rounds); such a row is
labelled with its entry, and claim 2 is not tested between rows of different entries.
The reference rows (random init, central) follow: a family's random-init row is shown on every protocol
one of its rows is read on.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from dssl.data.partition import IID_ALPHA
from dssl.reporting.claims import (UNTESTABLE, Finding, PretrainingGate, compare, difference_of_differences,
                                   unpaired_seeds)
from dssl.reporting.results import summarise
from dssl.reporting.sections.base import (FIGURES, FOLDER, ReportContext, ReportSection, known_protocols,
                                          register_section, unevaluated)
from dssl.reporting.tables import (
    CELL_NOTE, FAMILY_ORDER, METHOD_ORDER, cell_name, compared_cells, dataset_name, drop_pp, family_name,
    format_drop, format_summary, index_in, markdown_table, row_label,
)

IID, LABEL, FEATURE = "IID", "L/non-IID", "F/non-IID"
SETTINGS = (IID, LABEL, FEATURE)
SCHEME_SETTING = {"iid": IID, "dirichlet_balanced": LABEL, "dirichlet_min_size": LABEL, "feature": FEATURE}
# Paper A's own label split is the balanced Dirichlet; the min-size variant fills the cell only without it.
# Its IID is the balanced Dirichlet at alpha = 1e5; the even random split ("iid") fills the cell only without it.
SCHEME_RANK = {"iid": 1, "dirichlet_balanced": 0, "dirichlet_min_size": 1, "feature": 0}
PAPER_COLUMNS = {"iid": IID, "label_noniid": LABEL, "feature_noniid": FEATURE}
PAPER_ROWS = {"SimSiam + CNN": "simsiam_cnn", "MAE + CNN": "mae_cnn",
              "SimSiam + ViT": "simsiam_vit", "MAE + ViT": "mae_vit"}
CELL = ["row", "dataset", "setting"]
PROTOCOL_NAMES = {"finetune": "full fine-tuning", "linear_probe": "linear probe"}
CLAIM_DROP = "non-IID pretraining lowers accuracy (paper A, Table 1)"
CLAIM_MAE = "MAE loses less accuracy to non-IID data than SimSiam (paper A, Table 1)"


def protocol_name(protocol: str) -> str:
    return PROTOCOL_NAMES.get(protocol, protocol.replace("_", " "))


def table1_runs(results: pd.DataFrame, protocol: str, dataset: str | None = None,
                strategy: str | None = "fedavg", partitions: list[str] | None = None,
                protocols: Mapping[str, str] | None = None,
                strategies: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The result rows of Table 1 (FL cells and reference rows) with their ``row`` and ``setting``.

    ``protocols``: model -> the protocol its rows are read on (default ``protocol``). A reference row on a
    protocol other than ``protocol`` has it in its label ("random init + ViT · knn"). ``strategies``: model
    -> the strategy entry of its FL rows (default ``strategy``).

    FL rows: scheme iid and dirichlet_* at alpha >= 1e5 (paper A's IID) -> IID, other dirichlet_* ->
    L/non-IID, feature -> F/non-IID (the min-size Dirichlet only where the balanced one is absent, the
    random split only where paper A's alpha = 1e5 draw is). Reference rows "random init + <family>" and
    "central <method> + <family>" fill the IID column: they do not depend on the partition.
    """
    protocols = dict(protocols or {})
    runs = results if dataset is None else results[results["dataset"] == dataset]
    read_on = runs["model"].map(lambda model: protocols.get(model, protocol))
    fl = runs[(runs["framework"] == "fl") & runs["scheme"].isin(SCHEME_SETTING) & (runs["protocol"] == read_on)]
    if partitions is not None:
        fl = fl[fl["partition"].isin(partitions)]
    if strategy is not None and "strategy" in fl:   # Table 1 is FedAvg; MAR has its own sections
        entry = fl["model"].map(lambda model: dict(strategies or {}).get(model, strategy))
        fl = fl[fl["strategy"].isna() | (fl["strategy"] == entry)]
    fl = fl.assign(row=[row_label(m, f) for m, f in zip(fl["method"], fl["family"])],
                   setting=[partition_setting(scheme, alpha) for scheme, alpha in zip(fl["scheme"], fl["alpha"])])
    fl = fl.assign(rank=fl["scheme"].map(SCHEME_RANK))
    fl = fl[fl["rank"] == fl.groupby(CELL)["rank"].transform("min")].drop(columns="rank")
    shown = {(family, protocol) for family in runs["family"].dropna().unique()}
    shown |= set(zip(fl["family"], fl["protocol"]))
    on_shown = pd.Series([pair in shown for pair in zip(runs["family"], runs["protocol"])], index=runs.index,
                         dtype=bool)
    reference = runs[((runs["framework"] == "random") & on_shown)
                     | ((runs["framework"] == "central") & (runs["protocol"] == read_on))]
    reference = reference.assign(row=[_reference_label(r, protocol) for r in reference.itertuples()], setting=IID)
    cells = pd.concat([fl, reference], ignore_index=True)
    _check_cells(cells)
    return cells


def partition_setting(scheme: str, alpha: float | None) -> str:
    """Table 1's column of a partition: a Dirichlet at paper A's IID concentration (alpha >= 1e5) is IID."""
    if scheme.startswith("dirichlet") and alpha is not None and alpha >= IID_ALPHA:
        return IID
    return SCHEME_SETTING[scheme]


PROTOCOL_MARK = " · "


def _unequal_rows(cells: list[pd.DataFrame]) -> str | None:
    """Why cells are not compared, or None: changes on two protocols are not on one scale, rows of different
    strategy entries trained different depths, and cells of different seeds cannot be paired (grids that
    set their own seeds)."""
    for column, noun, option in (("protocol", "protocols", "protocols"),
                                 ("strategy", "strategy entries", "strategies")):
        values = sorted({str(cell[column].iloc[0]) for cell in cells})
        if len(values) > 1:
            return f"the rows have different {noun} ({', '.join(values)}): report.sections.table1.{option}"
    return unpaired_seeds("the cells", [cell["seed"] for cell in cells])


def _reference_label(run: Any, protocol: str) -> str:
    if run.framework == "random":
        label = f"random init + {family_name(run.family)}"
    else:
        label = f"central {row_label(run.method, run.family)}"
    return label if run.protocol == protocol else f"{label}{PROTOCOL_MARK}{run.protocol}"


def _check_cells(cells: pd.DataFrame) -> None:
    for column in ("model", "partition"):
        counts = cells.groupby(CELL, dropna=False)[column].nunique()
        if (counts > 1).any():
            cell = counts[counts > 1].index[0]
            found = sorted(cells.set_index(CELL).loc[cell, column].dropna().unique())
            raise ValueError(f"Table 1 cell {cell} mixes {column}s {found}; filter the results to one "
                             f"{column} per cell before building the table (report.sections.table1."
                             "partitions names the partitions of its columns)")
    repeated = cells[cells.duplicated([*CELL, "seed"], keep=False)]
    if not repeated.empty:
        raise ValueError(f"Table 1 cell {tuple(repeated.iloc[0][CELL])} has seed {repeated.iloc[0]['seed']} "
                         f"more than once: {sorted(repeated['stage'])}")


def _row_order(row: str) -> tuple:
    """FL rows first in paper order, then per family the random-init and central reference rows."""
    reference = row.startswith(("random init", "central"))
    label = row.split(PROTOCOL_MARK)[0].removeprefix("central ").removeprefix("random init + ")
    method, _, family = label.rpartition(" + ")
    rank = 1 if row.startswith("central") else 0
    return (reference, index_in(FAMILY_ORDER, family), rank, index_in(METHOD_ORDER, method), row)


def table1_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (row, dataset, setting): mean %, seed CI, n, test-set CI, runs; in table order."""
    cells = summarise(runs, CELL)
    key = [(_row_order(r), d, SETTINGS.index(s)) for r, d, s in zip(cells["row"], cells["dataset"], cells["setting"])]
    return cells.iloc[sorted(range(len(cells)), key=key.__getitem__)].reset_index(drop=True)


def paper_cells(paper: Mapping[str, Any]) -> pd.DataFrame:
    """Paper A's Table 1 (mean of 3 trials, no spread printed) in the long form of ``table1_cells``."""
    table = paper["table1_mim_vs_cl"]
    labels = {key: label for label, key in PAPER_ROWS.items()}
    rows = [{"row": labels[key], "dataset": dataset, "setting": PAPER_COLUMNS[column], "mean": value,
             "ci": math.nan, "n": 3, "test_ci": math.nan}
            for key, by_dataset in table["rows"].items()
            for dataset, values in by_dataset.items()
            for column, value in zip(table["columns"], values)]
    return pd.DataFrame(rows)


def wide_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Rows x (dataset, setting) of cell strings; non-IID cells carry their change from IID."""
    means = cells.set_index(CELL)["mean"]
    rows = list(dict.fromkeys(cells["row"]))
    table = pd.DataFrame(index=pd.Index(rows, name="model"))
    for dataset in dict.fromkeys(cells["dataset"]):
        for setting in SETTINGS:
            column = cells[(cells["dataset"] == dataset) & (cells["setting"] == setting)].set_index("row")
            if column.empty:
                continue
            table[f"{dataset_name(dataset)} {setting}"] = [
                _cell_text(column.loc[row], means.get((row, dataset, IID)), setting) if row in column.index else ""
                for row in rows]
    return table


def _cell_text(cell: pd.Series, iid_mean: float | None, setting: str) -> str:
    text = format_summary(cell)
    if setting != IID and iid_mean is not None:
        text += f" {format_drop(drop_pp(iid_mean, cell['mean']))}"
    return text


@register_section("table1")
class Table1(ReportSection):
    """Paper A's Table 1 with the protocol the run can afford; ``protocols``: model -> the protocol that
    model's rows are read on instead (declared before the run); ``dataset``: one column group (default
    all); ``strategy``: the strategy entry of its FL rows (paper A's FedAvg); ``partitions``: the
    partitions of its columns (default every one; name them when another grid trains the same cells on
    more partitions of one scheme, as Fig. 2b's label-skew sweep does)."""

    def __init__(self, protocol: str = "finetune", dataset: str | None = None, strategy: str = "fedavg",
                 partitions: list[str] | None = None, protocols: dict[str, str] | None = None,
                 strategies: dict[str, str] | None = None) -> None:
        self.protocols = known_protocols(protocol, protocols)
        self.strategies = dict(strategies or {})
        if not all(isinstance(v, str) and v for v in self.strategies.values()):
            raise ValueError(f"strategies must map a model to a strategy entry's name, got {self.strategies}")
        self.protocol, self.dataset, self.strategy = protocol, dataset, strategy
        self.partitions = list(partitions) if partitions is not None else None

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"Table 1: FL pretraining under IID and non-IID data ({protocol_name(self.protocol)})"

    def read_problems(self, params: dict) -> list[str]:
        """FL cells of the table's strategy (per model) and partitions whose evaluation does not run the model's
        protocol on a dataset the cell is read on (``base.unevaluated``)."""
        from dssl.config.evaluation_plan import cell_pairs
        from dssl.config.grids import grid_cells

        problems = []
        for cell in grid_cells(params, "fl"):
            model, partition, strategy = cell
            read = strategy == self.strategies.get(model, self.strategy)
            if not read or partition not in (self.partitions or [partition]):
                continue
            datasets = [self.dataset] if self.dataset else sorted({d for d, _ in cell_pairs(params, "fl", cell)})
            protocol = self.protocols.get(model, self.protocol)
            problems += [why for dataset in datasets if (why := unevaluated(params, "fl", cell, dataset, protocol))]
        return problems

    def data(self, ctx: ReportContext) -> pd.DataFrame:
        self._runs = table1_runs(ctx.results, self.protocol, self.dataset, self.strategy, self.partitions,
                                 self.protocols, self.strategies)
        return table1_cells(self._runs) if not self._runs.empty else pd.DataFrame()

    def findings(self, data: pd.DataFrame, ctx: ReportContext) -> list[Finding]:
        gate = PretrainingGate(ctx.results)
        cells = {key: group for key, group in self._runs.groupby(CELL, sort=False)}
        return [*self._drop_findings(cells, gate), *self._mae_findings(cells, gate)]

    def _drop_findings(self, cells: dict, gate: PretrainingGate) -> list[Finding]:
        found = []
        for (row, dataset, setting), cell in cells.items():
            iid = cells.get((row, dataset, IID))
            if setting == IID or iid is None:
                continue
            subject = f"{row}, {dataset_name(dataset)} {setting}"
            cells_named = compared_cells(cell, iid)
            # the claim's higher arm is IID: a non-IID cell below random init is the drop the claim predicts
            arms = {f"{row} {IID}": iid}
            blocked = _unequal_rows([cell, iid]) or gate.untestable(arms)
            if blocked:
                found.append(Finding(self.name, CLAIM_DROP, subject, UNTESTABLE, None, blocked, cells=cells_named,
                                     expected_sign=-1, gated=tuple(arms)))
                continue
            diff, outcome = compare(cell, iid, -1)
            found.append(Finding(self.name, CLAIM_DROP, subject, outcome, diff, "non-IID - IID", cells=cells_named,
                                 expected_sign=-1, gated=tuple(arms)))
        return found

    def _mae_findings(self, cells: dict, gate: PretrainingGate) -> list[Finding]:
        found = []
        for family in FAMILY_ORDER:
            simsiam, mae = f"SimSiam + {family}", f"MAE + {family}"
            for (row, dataset, setting), _ in cells.items():
                keys = [(r, dataset, s) for r in (mae, simsiam) for s in (setting, IID)]
                if row != mae or setting == IID or any(k not in cells for k in keys):
                    continue
                four = [cells[k] for k in keys]
                subject = f"{family}, {dataset_name(dataset)} {setting}"
                cells_named = compared_cells(*four)
                unequal = _unequal_rows(four)
                if unequal:
                    found.append(Finding(self.name, CLAIM_MAE, subject, UNTESTABLE, None, unequal, cells=cells_named))
                    continue
                arms = {f"{r} {s}": cells[(r, dataset, s)] for r, _, s in keys}   # a difference of differences
                blocked = gate.untestable(arms)
                if blocked:
                    found.append(Finding(self.name, CLAIM_MAE, subject, UNTESTABLE, None, blocked, cells=cells_named,
                                         gated=tuple(arms)))
                    continue
                diff, outcome = difference_of_differences(*four, +1)
                found.append(Finding(self.name, CLAIM_MAE, subject, outcome, diff,
                                     "(MAE non-IID - IID) - (SimSiam non-IID - IID)", cells=cells_named,
                                     gated=tuple(arms)))
        return found

    def _named(self, table: pd.DataFrame) -> pd.DataFrame:
        """Row labels with their model (reference rows: their whole cell), column labels with their partition."""
        runs = self._runs
        fl = runs[runs["framework"] == "fl"]
        rows = {}
        for row, group in runs.groupby("row", sort=False):
            first = group.iloc[0]
            rows[row] = self._model_text(first) if first["framework"] == "fl" else cell_name(first)
        partitions = fl.groupby(["dataset", "setting"])["partition"].first()
        columns = {f"{dataset_name(d)} {s}": p for (d, s), p in partitions.items()}
        return table.rename(index=lambda r: f"{r} ({rows[r]})" if r in rows else r,
                            columns=lambda c: f"{c} ({columns[c]})" if c in columns else c)

    def _model_text(self, run: pd.Series) -> str:
        """An FL row's model, with its strategy entry and protocol where they are not the table's."""
        extras = [run[column] for column, default in (("strategy", self.strategy), ("protocol", self.protocol))
                  if pd.notna(run.get(column)) and run[column] != default]
        return ", ".join([run["model"], *extras])

    def markdown(self, data: pd.DataFrame, findings: list[Finding], ctx: ReportContext) -> str:
        paper = ctx.paper["table1_mim_vs_cl"]
        setting = paper["setting"]
        rows = [r for r in dict.fromkeys(data["row"]) if r in PAPER_ROWS]
        parts = [
            f"![Table 1 as grouped bars: accuracy per model and setting]({FIGURES}/table1.png)",
            f"Top-1 accuracy in %: {CELL_NOTE}. In brackets the change from the IID column, as the paper "
            "prints it (↓ lower, ↑ higher). L/non-IID: Dirichlet label skew; F/non-IID: a fixed "
            "augmentation per client. The reference rows (random init, central pretraining) do not depend "
            "on the partition and fill the IID column only.",
            f"**Measured (this pipeline)**: FL cells fl/<model>/<partition>/{self.strategy}"
            f"{self._other_strategies_text()}, scored with {self.protocol}{self._other_protocols_text()}; the "
            "model and partition of each row and column in brackets.",
            markdown_table(self._named(wide_table(data))),
            f"**Paper A, Table 1** (FL pretraining on Mini-ImageNet, {setting['clients']} clients, "
            f"{setting['per_round']} per round, {setting['local_epochs']} local epochs, {setting['rounds']} "
            "rounds; full fine-tuning; mean of 3 trials, no spread printed)",
            markdown_table(wide_table(paper_cells(ctx.paper)).loc[rows]) if rows
            else "No measured row has a counterpart in paper A's Table 1.",
            f"The cells with their intervals and MLflow runs: [{FOLDER}/table1.csv]({FOLDER}/table1.csv).",
            "**Claim check** (paired by seed; a claim is tested only where the pretraining of its gated "
            "arms beats their random-init backbone: the IID cell for a drop, all four cells for MAE against "
            "SimSiam)\n\n" + "\n".join(f.line() for f in findings),
        ]
        return "\n\n".join(parts)

    def _other_strategies_text(self) -> str:
        if not self.strategies:
            return ""
        named = ", ".join(f"{model}'s {self._strategy_text(name)}" for model, name in self.strategies.items())
        return (f" ({named}; claim 2 is not tested between rows of different strategy entries)")

    def _strategy_text(self, name: str) -> str:
        """A strategy entry with the rounds and seeds its cells ran, from the results (e.g. "fedavg-r120:
        120 rounds, seeds 0-4")."""
        runs = self._runs[self._runs["strategy"] == name] if "strategy" in self._runs else self._runs.iloc[:0]
        rounds = sorted({int(r) for r in runs["rounds"].dropna()}) if "rounds" in runs else []
        seeds = sorted({int(s) for s in runs["seed"]})
        facts = [f"{', '.join(map(str, rounds))} rounds" if rounds else None,
                 f"seeds {', '.join(map(str, seeds))}" if seeds else None]
        return f"{name} ({', '.join(f for f in facts if f)})" if any(facts) else name

    def _other_protocols_text(self) -> str:
        if not self.protocols:
            return ""
        named = ", ".join(f"{model} on {name}" for model, name in self.protocols.items())
        return (f" ({named}: declared in params.yaml before the run, the protocol where that model's "
                "pretraining shows at this scale; its reference rows on the same protocol are marked · <protocol>)")

    def figures(self, data: pd.DataFrame, ctx: ReportContext) -> dict[str, Callable[[Path], Path]]:
        from dssl.reporting.figures import grouped_bars

        cells = data.assign(panel=[dataset_name(d) for d in data["dataset"]], hue=data["setting"])
        datasets = ", ".join(dict.fromkeys(data["dataset"]))
        entries = self.strategy + "".join(f", {model}: {name}" for model, name in self.strategies.items())
        title = (f"Table 1: FL pretraining (fl/<model>/<partition>/{entries}) under IID and non-IID data; "
                 "random-init and central references in the IID colour")
        read_on = self.protocol + "".join(f", {model} on {name}" for model, name in self.protocols.items())
        note = ctx.note(f"{read_on} on {datasets}") + " · bars: mean, whiskers: 95 % seed interval"
        label = "top-1 accuracy (%)" if self.protocols else f"{protocol_name(self.protocol)} top-1 accuracy (%)"
        return {"table1.png": lambda path: grouped_bars(cells, path, SETTINGS, title, label, note)}

"""Paper A's Table 1 (FL pretraining under IID / label / feature non-IID data) and a linear-probe table.

Paper A (FedMAR, ICLR 2026), Table 1: SimSiam and MAE, each with a CNN and a ViT backbone, pretrained
with FedAvg under IID, label non-IID (Dirichlet) and feature non-IID partitions, then fully fine-tuned;
every non-IID cell prints its drop from the IID cell, e.g. "84.33 (↓1.70)". The measured table adds
reference rows the paper does not have: the random-init backbone and centralised pretraining.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import yaml

from dssl.reporting.results import summarise, within_noise

PAPER_NUMBERS = Path(__file__).with_name("paper_numbers.yaml")

METHOD_NAMES = {"simsiam": "SimSiam", "mae": "MAE", "mae_cnn": "MAE", "byol": "BYOL",
                "simclr": "SimCLR", "moco": "MoCo"}
FAMILY_NAMES = {"cnn": "CNN", "vit": "ViT"}
DATASET_NAMES = {"digits": "Digits", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "imagenet": "ImageNet"}
METHOD_ORDER = ("SimSiam", "MAE")          # paper order: SimSiam + CNN, MAE + CNN, SimSiam + ViT, MAE + ViT
FAMILY_ORDER = ("CNN", "ViT")
FRAMEWORK_ORDER = ("central", "fl", "decl")

IID, LABEL, FEATURE = "IID", "L/non-IID", "F/non-IID"
SETTINGS = (IID, LABEL, FEATURE)
SCHEME_SETTING = {"iid": IID, "dirichlet_balanced": LABEL, "dirichlet_min_size": LABEL, "feature": FEATURE}
# Paper A's own label split is the balanced Dirichlet; the min-size variant fills the cell only without it.
SCHEME_RANK = {"iid": 0, "dirichlet_balanced": 0, "dirichlet_min_size": 1, "feature": 0}
PAPER_COLUMNS = {"iid": IID, "label_noniid": LABEL, "feature_noniid": FEATURE}
PAPER_ROWS = {"SimSiam + CNN": "simsiam_cnn", "MAE + CNN": "mae_cnn",
              "SimSiam + ViT": "simsiam_vit", "MAE + ViT": "mae_vit"}

CELL = ["row", "dataset", "setting"]
CELL_COLUMNS = [*CELL, "mean", "std", "n", "runs", "order"]


@cache
def load_paper_numbers() -> dict[str, Any]:
    """Paper A's numbers the report prints (Table 1, the Fig. 2a grid and claim), from paper_numbers.yaml."""
    return yaml.safe_load(PAPER_NUMBERS.read_text())


def method_name(method: str) -> str:
    """Display name of a method; MAE-CNN counts as MAE, as in paper A's Table 1."""
    return METHOD_NAMES.get(method, method)


def row_label(method: str, family: str) -> str:
    """Table 1 row label as paper A prints it, e.g. "SimSiam + CNN"."""
    return f"{method_name(method)} + {FAMILY_NAMES.get(family, family)}"


def dataset_name(dataset: str) -> str:
    return DATASET_NAMES.get(dataset, dataset)


def format_accuracy(mean: float, std: float = math.nan, n: int = 1) -> str:
    """"84.33", or "84.33 ± 0.40" when a seed std exists; the caller appends the drop and [n=...]."""
    if n > 1 and not math.isnan(std):
        return f"{mean:.2f} ± {std:.2f}"
    return f"{mean:.2f}"


def format_drop(drop: float) -> str:
    """Change from IID as paper A prints it: "(↓1.70)" when non-IID is lower, "(↑0.40)" when higher."""
    if drop < 0:
        return f"(↓{-drop:.2f})"
    if drop > 0:
        return f"(↑{drop:.2f})"
    return "(0.00)"


def drop_pp(iid_mean: float, noniid_mean: float) -> float:
    """Non-IID minus IID in percentage points, from the two-decimal values the table prints."""
    return round(round(noniid_mean, 2) - round(iid_mean, 2), 2)


def table1_cells(df: pd.DataFrame, protocol: str = "finetune") -> pd.DataFrame:
    """Table 1 in long form: one row per (row label, dataset, setting) with mean %, std, n and runs.

    FL rows come from framework "fl" (scheme iid -> IID, dirichlet_* -> L/non-IID, feature -> F/non-IID);
    reference rows "random init + <family>" and "central <method> + <family>" fill the IID column only,
    since they do not depend on the partition. Raises ValueError when a cell mixes several models or
    partitions, or holds the same seed twice.
    """
    runs = df[df["protocol"] == protocol]
    fl = runs[(runs["framework"] == "fl") & runs["scheme"].isin(SCHEME_SETTING)]
    fl = _preferred_partitions(fl.assign(
        row=[row_label(m, f) for m, f in zip(fl["method"], fl["family"])],
        setting=fl["scheme"].map(SCHEME_SETTING),
    ))
    reference = runs[runs["framework"].isin(["random", "central"])]
    reference = reference.assign(row=[_reference_label(r) for r in reference.itertuples()], setting=IID)
    cells = pd.concat([fl, reference], ignore_index=True)
    if cells.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    _check_cells(cells)
    order = {row: _row_order(r) for row, r in zip(cells["row"], cells.itertuples())}
    summary = summarise(cells, CELL)
    summary = summary.assign(order=summary["row"].map(order))
    return summary.sort_values(["order", "dataset", "setting"], key=_sort_key, kind="stable")


def _sort_key(column: pd.Series) -> pd.Series:
    if column.name == "dataset":
        return column.map(_dataset_key)
    if column.name == "setting":
        return column.map(SETTINGS.index)
    return column


def _dataset_key(dataset: str) -> tuple[int, str]:
    """Datasets in paper order (small-scale ones first), unknown ones after, by name."""
    return _index(tuple(DATASET_NAMES), dataset), dataset


def _reference_label(run: Any) -> str:
    if run.framework == "random":
        return f"random init + {FAMILY_NAMES.get(run.family, run.family)}"
    return f"central {row_label(run.method, run.family)}"


def _row_order(run: Any) -> tuple:
    """FL rows first in paper order, then per family the random-init and central reference rows."""
    family = FAMILY_NAMES.get(run.family, run.family)
    method = method_name(run.method) if run.method else ""
    rank = {"fl": 0, "random": 0, "central": 1}[run.framework]
    return (run.framework != "fl", _index(FAMILY_ORDER, family), rank, _index(METHOD_ORDER, method), run.row)


def _index(order: tuple[str, ...], value: str) -> int:
    return order.index(value) if value in order else len(order)


def _preferred_partitions(fl: pd.DataFrame) -> pd.DataFrame:
    rank = fl["scheme"].map(SCHEME_RANK)
    return fl[rank == rank.groupby([fl[c] for c in CELL]).transform("min")]


def _check_cells(cells: pd.DataFrame) -> None:
    for column in ("model", "partition"):
        counts = cells.groupby(CELL, dropna=False)[column].nunique()
        if (counts > 1).any():
            cell = counts[counts > 1].index[0]
            found = sorted(cells.set_index(CELL).loc[cell, column].dropna().unique())
            raise ValueError(f"Table 1 cell {cell} mixes {column}s {found}; filter the results to one "
                             f"{column} per cell before building the table")
    repeated = cells[cells.duplicated([*CELL, "seed"], keep=False)]
    if not repeated.empty:
        raise ValueError(f"Table 1 cell {tuple(repeated.iloc[0][CELL])} has seed {repeated.iloc[0]['seed']} "
                         f"more than once: {sorted(repeated['stage'])}")


def noniid_drops(cells: pd.DataFrame) -> pd.DataFrame:
    """Per non-IID cell with an IID partner: the drop in pp and whether it is within seed noise."""
    iid = cells[cells["setting"] == IID].set_index(["row", "dataset"])
    rows = []
    for cell in cells[cells["setting"] != IID].itertuples():
        if (cell.row, cell.dataset) not in iid.index:
            continue
        base = iid.loc[(cell.row, cell.dataset)]
        drop = drop_pp(base["mean"], cell.mean)
        rows.append({"row": cell.row, "dataset": cell.dataset, "setting": cell.setting, "drop": drop,
                     "within_noise": within_noise(drop, [base["std"], cell.std], [base["n"], cell.n])})
    return pd.DataFrame(rows, columns=[*CELL, "drop", "within_noise"])


def format_table1(cells: pd.DataFrame) -> pd.DataFrame:
    """Wide Table 1 of strings: rows in ``cells`` order, one column per dataset x setting with data."""
    drops = noniid_drops(cells).set_index(CELL)["drop"]
    rows = list(dict.fromkeys(cells["row"]))
    datasets = sorted(set(cells["dataset"]), key=_dataset_key)
    table = pd.DataFrame(index=pd.Index(rows, name="model"))
    for dataset in datasets:
        for setting in SETTINGS:
            column = cells[(cells["dataset"] == dataset) & (cells["setting"] == setting)].set_index("row")
            if column.empty:
                continue
            table[f"{dataset_name(dataset)} {setting}"] = [
                _cell_text(column.loc[row], drops.get((row, dataset, setting))) if row in column.index else ""
                for row in rows
            ]
    return table


def _cell_text(cell: pd.Series, drop: float | None) -> str:
    text = format_accuracy(cell["mean"], cell["std"], cell["n"])
    if drop is not None:
        text += f" {format_drop(drop)}"
    return text + _seeds_suffix(cell["std"], cell["n"])


def _seeds_suffix(std: float, n: int) -> str:
    return f" [n={n}]" if n > 1 and not math.isnan(std) else ""


def table1(df: pd.DataFrame, protocol: str = "finetune") -> pd.DataFrame:
    """Paper A's Table 1 from measured results: accuracy in %, drop from IID in brackets, e.g. "84.33 (↓1.70)"."""
    return format_table1(table1_cells(df, protocol))


def paper_table1_cells(paper: Mapping[str, Any]) -> pd.DataFrame:
    """Paper A's Table 1 (mean of 3 trials, no std printed) in the long form of :func:`table1_cells`."""
    table = paper["table1_mim_vs_cl"]
    labels = {key: label for label, key in PAPER_ROWS.items()}
    rows = [
        {"row": labels[key], "dataset": dataset, "setting": PAPER_COLUMNS[column], "mean": value,
         "std": math.nan, "n": 3, "runs": (), "order": list(PAPER_ROWS).index(labels[key])}
        for key, by_dataset in table["rows"].items()
        for dataset, values in by_dataset.items()
        for column, value in zip(table["columns"], values)
    ]
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def table1_markdown(df_measured: pd.DataFrame, paper: Mapping[str, Any]) -> str:
    """The measured Table 1 (output of :func:`table1`) and paper A's Table 1 for the same rows, in Markdown."""
    rows = [row for row in df_measured.index if row in PAPER_ROWS]
    parts = ["**Measured (this pipeline)**", markdown_table(df_measured)]
    setting = paper["table1_mim_vs_cl"]["setting"]
    parts.append(f"**Paper A, Table 1** (FL pretraining on Mini-ImageNet, {setting['clients']} clients, "
                 f"{setting['per_round']} per round, {setting['local_epochs']} local epochs, "
                 f"{setting['rounds']} rounds; full fine-tuning; mean of 3 trials)")
    if rows:
        parts.append(markdown_table(format_table1(paper_table1_cells(paper)).loc[rows]))
    else:
        parts.append("No measured row has a counterpart in paper A's Table 1.")
    return "\n\n".join(parts)


def table1_csv(df: pd.DataFrame, path: Path | str, protocol: str = "finetune") -> Path:
    """Write Table 1 in long numeric form (mean %, std, n, drop, seed-noise flag, lineage) as CSV."""
    cells = table1_cells(df, protocol)
    drops = noniid_drops(cells)
    out = cells.drop(columns=["order"]).merge(drops, on=CELL, how="left")
    out["runs"] = ["; ".join(f"seed {seed}: {stage} ({run_id})" for seed, stage, run_id in runs)
                   for runs in out["runs"]]
    path = Path(path)
    out.to_csv(path, index=False, float_format="%.4f")
    return path


def linear_probe_table(df: pd.DataFrame) -> pd.DataFrame:
    """Linear-probe accuracy per pretrained model and framework against the random-init backbone.

    The baseline is the framework "random" run of the same family on the same dataset (the same backbone
    when several random-init backbones of that family exist). "SSL beats random init?" reads e.g.
    "yes (+12.30)", with ", within seed noise" when the margin is smaller than the pooled seed std.
    """
    probes = df[df["protocol"] == "linear_probe"]
    ssl = probes[probes["framework"] != "random"]
    ssl = ssl.assign(setting=[_pretraining_setting(r) for r in ssl.itertuples()])
    models = summarise(ssl, ["model", "framework", "setting", "dataset", "family", "backbone"])
    baselines = summarise(probes[probes["framework"] == "random"], ["family", "backbone", "dataset"])
    rows = [_probe_row(model, _baseline(baselines, model)) for model in models.itertuples()]
    table = pd.DataFrame(rows, columns=["model", "framework", "setting", "dataset", "linear probe (%)",
                                        "random init (%)", "margin (pp)", "SSL beats random init?"])
    order = table["framework"].map(lambda f: _index(FRAMEWORK_ORDER, f))
    return table.iloc[order.argsort(kind="stable")].reset_index(drop=True)


def _pretraining_setting(run: Any) -> str:
    if run.framework == "fl":
        return run.partition
    if run.framework == "decl":
        return f"{run.graph} ({run.partition})"
    return "-"


def _baseline(baselines: pd.DataFrame, model: Any) -> Any:
    pool = baselines[(baselines["family"] == model.family) & (baselines["dataset"] == model.dataset)]
    same = pool[pool["backbone"] == model.backbone]
    pick = same if len(same) else pool
    return next(pick.itertuples()) if len(pick) == 1 else None


def _probe_row(model: Any, baseline: Any) -> dict[str, Any]:
    row = {"model": model.model, "framework": model.framework, "setting": model.setting,
           "dataset": dataset_name(model.dataset),
           "linear probe (%)": _with_n(model.mean, model.std, model.n)}
    if baseline is None:
        return {**row, "random init (%)": "", "margin (pp)": math.nan,
                "SSL beats random init?": "n/a (no random-init run)"}
    margin = drop_pp(baseline.mean, model.mean)
    noise = within_noise(margin, [model.std, baseline.std], [model.n, baseline.n])
    verdict = f"{'yes' if margin > 0 else 'no'} ({margin:+.2f}{', within seed noise' if noise else ''})"
    return {**row, "random init (%)": _with_n(baseline.mean, baseline.std, baseline.n),
            "margin (pp)": margin, "SSL beats random init?": verdict}


def _with_n(mean: float, std: float, n: int) -> str:
    return format_accuracy(mean, std, n) + _seeds_suffix(std, n)


def markdown_table(frame: pd.DataFrame, index: bool = True) -> str:
    """A GitHub-flavoured Markdown table of ``frame`` (the index as first column when ``index``)."""
    data = frame.reset_index() if index else frame
    header = [str(c) for c in data.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for values in data.itertuples(index=False):
        lines.append("| " + " | ".join(_markdown_cell(v) for v in values) + " |")
    return "\n".join(lines)


def _markdown_cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.2f}"
    return str(value).replace("|", "\\|")

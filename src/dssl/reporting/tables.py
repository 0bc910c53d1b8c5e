"""Display vocabulary and formatting shared by the report sections: names, cells, Markdown tables.

Registry keys (methods, families, datasets) are the names used everywhere else; the display names below
are how the papers print them (paper A's Table 1: "SimSiam + CNN").
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from dssl.yamlio import load_yaml

PAPER_NUMBERS = Path(__file__).with_name("paper_numbers.yaml")

METHOD_NAMES = {"simsiam": "SimSiam", "mae": "MAE", "mae_cnn": "MAE", "byol": "BYOL",
                "simclr": "SimCLR", "moco": "MoCo"}
FAMILY_NAMES = {"cnn": "CNN", "vit": "ViT"}
DATASET_NAMES = {"digits": "Digits", "digits_on_photos": "Digits on photos", "cifar10": "CIFAR-10",
                 "cifar100": "CIFAR-100", "imagenet": "ImageNet", "mini_imagenet": "Mini-ImageNet"}
METHOD_ORDER = ("SimSiam", "MAE")          # paper A's order: SimSiam + CNN, MAE + CNN, SimSiam + ViT, MAE + ViT
FAMILY_ORDER = ("CNN", "ViT")
FRAMEWORK_ORDER = ("central", "fl", "decl", "local")
CELL_NOTE = ("mean over seeds ± half-width of the 95 % Student-t interval over seeds [n seeds]; "
             "\"test ±\" is the half-width of the 95 % Wilson interval of that accuracy on the test set "
             "(the sampling error of one test set, which the seed interval does not contain)")


@cache
def load_paper_numbers() -> dict[str, Any]:
    """The papers' numbers the report prints, from paper_numbers.yaml."""
    return load_yaml(PAPER_NUMBERS.read_text())


def method_name(method: str) -> str:
    """Display name of a method; MAE-CNN counts as MAE, as in paper A's Table 1."""
    return METHOD_NAMES.get(method, method)


def family_name(family: str) -> str:
    return FAMILY_NAMES.get(family, family)


def row_label(method: str, family: str) -> str:
    """Table 1 row label as paper A prints it, e.g. "SimSiam + CNN"."""
    return f"{method_name(method)} + {family_name(family)}"


def dataset_name(dataset: str) -> str:
    return DATASET_NAMES.get(dataset, dataset)


def index_in(order: tuple[str, ...], value: str) -> int:
    """Position of ``value`` in a display order; unknown values sort last."""
    return order.index(value) if value in order else len(order)


def format_cell(mean: float, ci: float = math.nan, n: int = 1, test_ci: float = math.nan) -> str:
    """"84.33 ± 1.20 [n=3] (test ± 3.40)": see ``CELL_NOTE``; parts without a value are left out."""
    text = f"{mean:.2f}"
    if n > 1 and not math.isnan(ci):
        text += f" ± {ci:.2f} [n={n}]"
    if not math.isnan(test_ci):
        text += f" (test ± {test_ci:.2f})"
    return text


def format_summary(row: Any) -> str:
    """``format_cell`` of a ``results.summarise`` row (a Series, an ``itertuples`` row, or the mapping
    ``results.accuracy_summary`` returns)."""
    get = row.__getitem__ if isinstance(row, (pd.Series, dict)) else lambda key: getattr(row, key)
    return format_cell(get("mean"), get("ci"), get("n"), get("test_ci"))


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


# -- complete cell names, in the vocabulary of params.yaml -----------------------------------------------

PLACE_KEY = {"fl": "partition", "local": "partition", "decl": "graph"}   # where a framework's cell trains


def cell_name(run: Any) -> str:
    """The pretrained cell a result belongs to, named as the pipeline names it (its folder under
    ``reports/metrics/``): ``<framework>/<model>[/<partition or graph>[/<strategy>]]``, e.g.
    ``fl/mae-vit/fl-label/fedavg``, ``decl/mae-cnn/uniform-5/decl-uniform``, ``local/byol-cnn/fl-2class``,
    ``central/mae-cnn``; a random-init reference is ``random/<backbone>``. ``run``: a result row (a
    Series, mapping or ``itertuples`` row)."""
    get = run.get if isinstance(run, (pd.Series, dict)) else lambda key, default=None: getattr(run, key, default)
    framework = get("framework")
    subject = get("backbone") if framework == "random" else get("model")
    place = get(PLACE_KEY[framework]) if framework in PLACE_KEY else None
    strategy = get("strategy") if framework in ("fl", "decl") else None
    return "/".join(str(part) for part in (framework, subject, place, strategy) if _named(part))


def _named(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value != "-"


def evaluation_name(run: Any) -> str:
    """How a result was scored: ``<protocol> on <dataset>`` (its result file is ``<dataset>-<protocol>.json``)."""
    get = run.get if isinstance(run, (pd.Series, dict)) else lambda key: getattr(run, key)
    return f"{get('protocol')} on {get('dataset')}"


def compared_cells(*cells: pd.DataFrame) -> str:
    """The complete names of the cells a claim compares, with how they were scored:
    ``"linear_probe_10pct on digits: fl/mae-cnn/fl-feature/fedavg vs fl/mae-cnn/fl-iid/fedavg"``."""
    firsts = [cell.iloc[0] for cell in cells if not cell.empty]
    names = dict.fromkeys(cell_name(row) for row in firsts)
    scored = dict.fromkeys(evaluation_name(row) for row in firsts)
    return f"{', '.join(scored)}: {' vs '.join(names)}"


def runs_text(runs: tuple) -> str:
    """The lineage of a cell for CSVs: "seed 0: <stage> (<MLflow run name>); ..."."""
    return "; ".join(f"seed {seed}: {stage} ({run_id})" for seed, stage, run_id in runs)

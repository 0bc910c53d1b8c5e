"""The texts a comparison table prints beside its numbers: what each row ran (its model and strategy entries
as params.yaml configures them), the dataset its cells are read on, and the paper's values as a table.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from dssl.config.strategies import STRATEGY_SPECS
from dssl.config.study import StrategyEntry, thawed
from dssl.specs import option_defaults, option_keys


def read_on_text(data: pd.DataFrame) -> str:
    """The downstream dataset the cells are read on, or each column's where they differ (every cell and claim
    reads one dataset)."""
    by_column = dict(zip(data["column"], data["dataset"]))
    datasets = list(dict.fromkeys(by_column.values()))
    if len(datasets) == 1:
        return datasets[0]
    return "one dataset per column (" + ", ".join(f"{column}: {d}" for column, d in by_column.items()) + ")"


def model_text(spec: Mapping[str, Any]) -> str:
    """``byol on cnn_small (predictor=False)``: a models entry as params.yaml states it."""
    hparams = ", ".join(f"{k}={v}" for k, v in (spec.get("hparams") or {}).items())
    return f"{spec.get('method')} on {spec.get('backbone')}" + (f" ({hparams})" if hparams else "")


def strategy_text(name: str, spec: Mapping[str, Any]) -> str:
    """``fedema (aggregation=uniform, divergence=paper, ...; train: rounds=200)``: strategies entry ``name`` with
    every option it runs with (the strategy's declared defaults filled in) and its training overrides."""
    entry = StrategyEntry.from_spec(name, spec)
    options = thawed(entry.options)
    if entry.registry in STRATEGY_SPECS:
        config = STRATEGY_SPECS[entry.registry].config
        options = {**option_defaults(config), **{k: v for k, v in options.items() if k in option_keys(config)}}
    options.update(entry.round_options)
    text = ", ".join(f"{k}={v}" for k, v in options.items())
    if entry.train:
        text += "; train: " + ", ".join(f"{k}={_inline(v)}" for k, v in thawed(entry.train).items())
    return f"{entry.registry} ({text})"


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


def paper_table(paper: Mapping[str, Any], key: str | None) -> pd.DataFrame | None:
    """The paper's values of table ``key`` of ``paper_numbers.yaml`` (rows x columns) as text, blank where the
    paper gives no value; None when the paper has no such table."""
    table = paper.get(key) if key else None
    if not table:
        return None
    rows = {row: dict(zip(table["columns"], values)) for row, values in table["rows"].items()}
    return pd.DataFrame({column: [f"{rows[r][column]:.2f}" if column in rows.get(r, {}) else ""
                                  for r in rows] for column in table["columns"]},
                        index=pd.Index(list(rows), name="row"))

"""Where a comparison table's cells are: its rows and columns parsed into (framework, model, strategy, place).

A row names a strategy (a named entry of params.yaml's ``strategies``), a column a place (a partition for FL, a graph
for DecL); either may pin the other part with ``"<strategy>@<place>"`` (Table 6's FL reference row is
``decl-uniform@complete``), a row may name another model with ``"<model>:<strategy>"`` (paper B's tables
compare methods), a row may name a cell of another framework with ``"central/<model>"`` (the model trained
on the pooled data) or ``"local/<model>"`` (its stand-alone clients on the column's partition, scored as
their mean), and a row may give one spec per column (Table 7, whose columns are values of gamma). A column may
also name the downstream dataset its cells are read on (``{place: ..., dataset: ...}``). Parsing lives apart
from the section so that every layout rule is read in one place, by the section's validation and its data alike.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

PLACE = {"fl": "partition", "decl": "graph", "local": "partition"}
OTHER_FRAMEWORKS = ("central", "local")   # row specs "<framework>/<model>"
CellSpec = tuple[str, str, str, str]   # (framework, model, strategy or "", place or "")


def column_places(columns: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(label -> place, label -> dataset) of a section's ``columns``: a column is a place (``"fl-label"``,
    ``"<strategy>@<place>"``) or ``{place: ..., dataset: ...}``; raises ValueError naming a malformed one."""
    places, datasets = {}, {}
    for label, spec in columns.items():
        if isinstance(spec, Mapping):
            unknown = sorted(set(spec) - {"place", "dataset"})
            if unknown or not isinstance(spec.get("place"), str) or not isinstance(spec.get("dataset", ""), str):
                raise ValueError(f"column {label!r} must be a place or {{place: <partition or graph>, "
                                 f"dataset: <downstream dataset>}}, got {dict(spec)}")
            places[label] = spec["place"]
            if spec.get("dataset"):
                datasets[label] = spec["dataset"]
        elif isinstance(spec, str) and spec:
            places[label] = spec
        else:
            raise ValueError(f"column {label!r} must name a partition or graph, got {spec!r}")
    return places, datasets


def cell_spec(rows: Mapping[str, Any], columns: Mapping[str, str], row: str, column: str, framework: str,
              model: str) -> CellSpec | None:
    """(framework, model, strategy, place) of a cell: a row's parts win over the column's, ``framework`` and
    ``model`` are the section's; None when the row skips the column. Central cells have no strategy or place,
    stand-alone cells no strategy."""
    row_spec = rows[row]
    if isinstance(row_spec, Mapping):
        row_spec = row_spec.get(column)
        if row_spec is None:
            return None
    column_spec = columns[column]
    column_strategy, _, column_place = column_spec.rpartition("@") if "@" in column_spec else ("", "", column_spec)
    if "/" in str(row_spec):
        return _other_framework(str(row_spec), column_place, row, column)
    row_model, _, row_spec = str(row_spec).rpartition(":")
    row_strategy, _, row_place = row_spec.partition("@")
    strategy, place = row_strategy or column_strategy, row_place or column_place
    if not strategy or not place:
        raise ValueError(f"cell ({row}, {column}) names no {'strategy' if not strategy else 'place'}")
    return framework, row_model or model, strategy, place


def _other_framework(row_spec: str, column_place: str, row: str, column: str) -> CellSpec:
    """``central/<model>`` or ``local/<model>[@<partition>]``."""
    framework, _, rest = row_spec.partition("/")
    model, _, place = rest.partition("@")
    if framework not in OTHER_FRAMEWORKS or not model or ":" in model or (framework == "central" and place):
        raise ValueError(f"cell ({row}, {column}): {row_spec!r} is not 'central/<model>' or 'local/<model>'")
    return framework, model, "", (place or column_place) if framework == "local" else ""


def select_cell(results: pd.DataFrame, spec: CellSpec, protocol: str, dataset: str) -> pd.DataFrame:
    """The evaluation results of one cell, scored with ``protocol`` on ``dataset`` (empty when it did not run)."""
    framework, model, strategy, place = spec
    chosen = ((results["framework"] == framework) & (results["model"] == model)
              & (results["protocol"] == protocol) & (results["dataset"] == dataset))
    if strategy:
        chosen &= results["strategy"] == strategy
    if place:
        chosen &= results[PLACE[framework]] == place
    return results[chosen]

"""Lineage you can audit: for a result file or a Table 1 cell, every stage behind the number (from
dvc.lock), its MLflow run (params, metrics, git commit), the md5 of every file it read, and whether
the workspace still matches what dvc.lock recorded (``dssl lineage``).

This package sits above ``pipeline`` and ``tracking`` and is imported by the CLI only; no stage
imports it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dssl.lineage.audit import ResultLineage, RunIndex, trace_result
from dssl.lineage.cell import cell_runs, result_file
from dssl.lineage.lock import LineageError, read_lock
from dssl.lineage.text import render_text

__all__ = ["LineageError", "ResultLineage", "lineage", "render_text", "trace_cell", "trace_result"]


def trace_cell(root: Path, table: Path, row: str, column: str) -> dict[str, Any]:
    """Every seed's lineage of one Table 1 cell."""
    root = Path(root).resolve()
    table = table if table.is_absolute() or table.exists() else root / table
    cell, runs = cell_runs(table, row, column)
    lock = read_lock(root)
    index = RunIndex(root)
    results = [trace_result(root, result_file(root, lock, run), lock, index) for run in runs]
    return {"table": str(table), "cell": cell, "results": results}


def lineage(root: Path, target: Path, row: str | None = None, column: str | None = None) -> dict[str, Any]:
    """A result file's lineage, or a table cell's (``row`` and ``column`` given)."""
    if (row is None) != (column is None):
        raise LineageError("name a table cell by both its row and its column, e.g. "
                           "`dssl lineage reports/sections/table1.csv 'SimSiam + CNN' 'digits IID'`")
    if row is not None:
        return trace_cell(root, target, row, column)
    if target.suffix == ".csv":
        raise LineageError(f"{target}: a table needs a row and a column, e.g. "
                           f"`dssl lineage {target} 'SimSiam + CNN' 'digits IID'`")
    return {"table": None, "cell": None, "results": [trace_result(root, target)]}


def as_json(answer: dict[str, Any]) -> str:
    data = {**answer, "results": [r.as_dict() for r in answer["results"]]}
    data["matches_lock"] = all(r.matches_lock for r in answer["results"])
    return json.dumps(data, indent=1, default=str)

"""Lineage you can audit: for a result file or a Table 1 cell, every stage behind the number (from
dvc.lock), its MLflow run (params, metrics, git commit), the md5 of every file it read, and whether
the workspace still matches what dvc.lock recorded (``dssl lineage``). A result of another params file
than params.yaml lies in that file's pipeline folder (runs/<profile>/), whose own dvc.lock files and
tracking store answer; the answer names the params file.

This package sits above ``pipeline`` and ``tracking`` and is imported by the CLI only; no stage
imports it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dssl.lineage.audit import ResultLineage, RunIndex, trace_result
from dssl.lineage.cell import cell_runs, result_file
from dssl.lineage.lock import LineageError, dvc_repository, params_file, read_lock
from dssl.lineage.text import render_text
from dssl.tracking import project_root

__all__ = ["LineageError", "ResultLineage", "lineage", "render_text", "trace_cell", "trace_result"]


def trace_cell(root: Path, table: Path, row: str, column: str) -> dict[str, Any]:
    """Every seed's lineage of one Table 1 cell (``root``: the pipeline folder of the table)."""
    root = Path(root).resolve()
    table = table if table.is_absolute() or table.exists() else root / table
    cell, runs = cell_runs(table, row, column)
    lock = read_lock(root)
    index = RunIndex(root)
    results = [trace_result(root, result_file(root, lock, run), lock, index) for run in runs]
    return {"table": str(table), "cell": cell, "results": results}


def lineage(root: Path, target: Path, row: str | None = None, column: str | None = None) -> dict[str, Any]:
    """A result file's lineage, or a table cell's (``row`` and ``column`` given); ``target`` is relative to
    the working directory or to ``root``, and may lie in a pipeline folder under ``root``."""
    if (row is None) != (column is None):
        raise LineageError("name a table cell by both its row and its column, e.g. "
                           "`dssl lineage reports/sections/table1.csv 'SimSiam + CNN' 'digits IID'`")
    if target.suffix == ".csv" and row is None:
        raise LineageError(f"{target}: a table needs a row and a column, e.g. "
                           f"`dssl lineage {target} 'SimSiam + CNN' 'digits IID'`")
    folder = pipeline_of(Path(root), target)
    if row is not None:
        answer = trace_cell(folder, target, row, column)
    else:
        answer = {"table": None, "cell": None, "results": [trace_result(folder, target)]}
    return {**answer, **_pipeline_names(folder)}


def pipeline_of(root: Path, target: Path) -> Path:
    """The pipeline folder whose dvc.lock files record ``target``: the nearest folder above it holding a
    dvc.yaml (runs/<profile>/ for another params file's results), else ``root``."""
    absolute = target if target.is_absolute() else Path.cwd() / target
    if not absolute.exists() and not target.is_absolute():
        absolute = Path(root) / target
    return project_root(absolute.resolve().parent) if absolute.parent.exists() else Path(root).resolve()


def _pipeline_names(folder: Path) -> dict[str, str]:
    """The pipeline folder and the params file its dvc.lock files recorded, both relative to the project."""
    project = dvc_repository(folder)
    recorded = params_file(read_lock(folder))
    return {"pipeline": os.path.relpath(folder, project),
            "params_file": os.path.relpath((folder / recorded).resolve(), project)}


def as_json(answer: dict[str, Any]) -> str:
    data = {**answer, "results": [r.as_dict() for r in answer["results"]]}
    data["matches_lock"] = all(r.matches_lock for r in answer["results"])
    return json.dumps(data, indent=1, default=str)

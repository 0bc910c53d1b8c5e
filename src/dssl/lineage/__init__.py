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

__all__ = ["LineageError", "ResultLineage", "lineage", "matches_lock", "mismatch_line", "render_text", "trace_cell",
           "trace_result"]


def trace_cell(root: Path, table: Path, row: str, column: str, index: RunIndex | None = None) -> dict[str, Any]:
    """Every seed's lineage of one Table 1 cell (``root``: the pipeline folder of the table)."""
    root = Path(root).resolve()
    table = table if table.is_absolute() or table.exists() else root / table
    cell, runs = cell_runs(table, row, column, root)
    lock = read_lock(root)
    index = RunIndex(root) if index is None else index
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
    names = _pipeline_names(folder)
    index = RunIndex(folder)
    if row is not None:
        answer = trace_cell(folder, target, row, column, index)
    else:
        answer = {"table": None, "cell": None, "results": [trace_result(folder, target, runs=index)]}
    return {**answer, **names, "tracking_problem": index.problem}


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
    _check_owner(folder, project, folder / recorded)
    return {"pipeline": os.path.relpath(folder, project),
            "params_file": os.path.relpath((folder / recorded).resolve(), project)}


def _check_owner(folder: Path, project: Path, params_path: Path) -> None:
    """The pipeline folder must be the one of the params file its dvc.lock files recorded (the project for
    params.yaml, runs/<its profile>/ for another file): else its results and dvc.lock belong to another
    profile's run, or the file's profile was changed since, and the answer would mix the two."""
    from dssl.config.checker import ParamsError
    from dssl.config.params import read_params
    from dssl.pipeline.layout import pipeline_folder

    if not params_path.is_file():
        return   # the answer names the file; a value changed since is flagged per key
    try:
        expected = (project / pipeline_folder(params_path.resolve(), read_params(params_path), project)).resolve()
    except (ParamsError, ValueError) as err:
        raise LineageError(f"{params_path}, the params file of {folder}'s dvc.lock, cannot be read ({err})") from None
    if expected != folder.resolve():
        shown = os.path.relpath(params_path.resolve(), project)
        raise LineageError(f"{os.path.relpath(folder, project) or '.'}: its dvc.lock files were recorded with {shown}, "
                           f"whose pipeline folder is {os.path.relpath(expected, project)}/ (its profile changed "
                           f"since?); run that file's pipeline in its own folder (`dssl repro --params {shown}`)")


def matches_lock(answer: dict[str, Any]) -> bool:
    """Whether every path and params value of the answer is what dvc.lock recorded."""
    return all(r.matches_lock for r in answer["results"])


def mismatch_line(answer: dict[str, Any]) -> str | None:
    """One line for an answer that cannot be trusted as it stands (None: it can): the workspace differs
    from dvc.lock, or the tracking store could not be read (the lock part above still holds)."""
    mismatches = [m for r in answer["results"] for m in r.mismatches]
    problems = []
    if mismatches:
        where = answer.get("pipeline", ".")
        problems.append(f"the workspace does not match dvc.lock in {len(mismatches)} place(s), first "
                        f"{mismatches[0]} (`dvc status` in {where} lists what changed)")
    if answer.get("tracking_problem"):
        problems.append(f"{answer['tracking_problem']}: the MLflow runs are missing above, the dvc.lock part holds")
    return "; ".join(problems) or None


def as_json(answer: dict[str, Any]) -> str:
    data = {**answer, "results": [r.as_dict() for r in answer["results"]]}
    data["matches_lock"] = matches_lock(answer)
    return json.dumps(data, indent=1, default=str)

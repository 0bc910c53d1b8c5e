"""A table cell's numbers traced to their result files.

The report's Table 1 CSV (``reports/sections/table1.csv``) has one row per (row, dataset, setting) and a
``runs`` column listing the evaluation behind each seed as ``seed <s>: <stage> (<MLflow run name>)``,
separated by ``; ``; the run name is a function of the result file (``tracking.names.result_run_name``).
A cell is named as the printed table names it: the row label ("SimSiam + CNN") and the column ("Digits
IID", i.e. dataset and setting; the dataset may be spelled as in params.yaml or as printed, case and
punctuation aside).
"""

from __future__ import annotations

import csv
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from dssl.lineage.lock import LineageError, LockedStage
from dssl.tracking import project_root
from dssl.tracking.names import result_run_name

RUN_ENTRY = re.compile(r"seed (-?\d+): (\S+) \(([^)\s]+)\)")


@dataclass(frozen=True)
class CellRun:
    seed: int
    stage: str
    run_name: str


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def report_command(root: Path) -> str:
    """The command that brings the report of the pipeline folder ``root`` (and whatever it reads) up to
    date, as typed in the working folder: DVC names a stage of another folder's dvc.yaml only as
    ``<dvc.yaml>:<stage>``, and a bare ``dvc repro report`` works in the pipeline folder alone."""
    return f"dvc repro {Path(os.path.relpath(Path(root) / 'dvc.yaml')).as_posix()}:report"


def record_command(root: Path) -> str:
    """The command that records a Snakemake run of the pipeline folder ``root`` in its dvc.lock files."""
    return f"dvc commit -f -R {Path(os.path.relpath(root)).as_posix()}"


def cell_runs(table: Path, row: str, column: str, root: Path | None = None) -> tuple[dict[str, str], list[CellRun]]:
    """The CSV row of the cell and the runs it lists, one per seed (``root``: the table's pipeline folder;
    None: the nearest folder above the table holding a dvc.yaml)."""
    if not table.is_file():
        folder = root if root is not None else project_root(Path(table).resolve().parent)
        raise LineageError(f"{table}: no such table; the report stage writes it (`{report_command(folder)}`)")
    with open(table, newline="") as handle:
        rows = list(csv.DictReader(handle))
    missing = {"row", "dataset", "setting", "runs"} - set(rows[0] if rows else {})
    if missing:
        raise LineageError(f"{table}: not a Table 1 CSV (columns {sorted(missing)} missing)")
    labels = list(dict.fromkeys(r["row"] for r in rows))
    in_row = [r for r in rows if r["row"].strip().lower() == row.strip().lower()]
    if not in_row:
        raise LineageError(f"{table}: no row {row!r}; rows: {', '.join(labels)}")
    columns = list(dict.fromkeys(f"{r['dataset']} {r['setting']}" for r in rows))
    wanted = _squash(column)
    match = [r for r in in_row if wanted in (_squash(f"{r['dataset']} {r['setting']}"), _squash(r["setting"]))]
    if len({r["dataset"] for r in match}) > 1:
        raise LineageError(f"{table}: column {column!r} is ambiguous; name the dataset too: {', '.join(columns)}")
    if not match:
        offered = ", ".join(f"{r['dataset']} {r['setting']}" for r in in_row)
        raise LineageError(f"{table}: row {row!r} has no column {column!r}; columns of that row: {offered}")
    runs = [CellRun(int(seed), stage, name) for seed, stage, name in RUN_ENTRY.findall(match[0]["runs"])]
    if not runs:
        raise LineageError(f"{table}: cell ({row}, {column}) lists no runs in its 'runs' column")
    return match[0], runs


def result_file(root: Path, lock: dict[str, LockedStage], run: CellRun) -> str:
    """The result file of ``run``: the JSON in its stage's outputs whose run name is the run's."""
    stage = lock.get(run.stage)
    if stage is None:
        raise LineageError(f"stage {run.stage} (seed {run.seed}) is not in dvc.lock; the table is newer than "
                           f"the lock: run `{report_command(root)}` (or `{record_command(root)}` after Snakemake)")
    for out in stage.outs:
        folder = Path(root) / out.path
        for path in sorted(folder.rglob("*.json")) if folder.is_dir() else []:
            try:
                if _run_name(json.loads(path.read_text())) == run.run_name:
                    return path.relative_to(root).as_posix()
            except json.JSONDecodeError:
                continue
    raise LineageError(f"no result file of {run.stage} is the one of MLflow run {run.run_name} (seed {run.seed}): "
                       f"the results were rebuilt after the table; re-run the report (`{report_command(root)}`)")


def _run_name(record: object) -> str | None:
    """The run name of a result file's content; None for a JSON that is no evaluation result."""
    try:
        return result_run_name(record)   # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        return None

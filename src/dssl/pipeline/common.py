"""Shared machinery of the stage entry points: validation on start, atomic outputs, logging.

Every stage (1) loads and validates the whole params file before any work, (2) writes its outputs into
a temporary sibling and moves them into place only when complete, so a failure never leaves a
half-written output next to a good one, and (3) logs one MLflow run with its lineage.
"""

from __future__ import annotations

import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from dssl.config.params import load_params
from dssl.tracking import StageRecord, log_stage, project_root

# Output layout, shared by dvc.yaml, the Snakefile and the stages (one vocabulary).
PREPARED = Path("data/prepared")
PARTITIONS = Path("data/partitions")
GRAPHS = Path("data/graphs")
FIGURES = Path("reports/figures")


def prepared_dir(dataset: str) -> Path:
    return PREPARED / dataset


def partition_dir(name: str) -> Path:
    return PARTITIONS / name


def graph_file(name: str) -> Path:
    return GRAPHS / name / "graph.json"


class StageError(Exception):
    """A stage cannot run as asked (names what is wrong and how to fix it)."""


class Stage:
    """Context of one stage run: validated params, the entry it reads, timing and logging."""

    def __init__(self, kind: str, name: str, params_path: Path | str):
        self.kind = kind
        self.name = name
        self.params = load_params(params_path)
        self.root = project_root()
        self.profile = str(self.params.get("profile", "default"))
        self.started = time.perf_counter()

    @property
    def stage_name(self) -> str:
        """As DVC names it: ``kind@entry`` for foreach/matrix stages, ``kind`` for single ones."""
        return f"{self.kind}@{self.name}" if self.name else self.kind

    def entry(self, section: str) -> dict:
        entries = self.params.get(section) or {}
        if self.name not in entries:
            known = ", ".join(sorted(entries)) or "(none)"
            raise StageError(f"'{self.name}' is not defined in params section '{section}'; defined: {known}")
        return entries[self.name] or {}

    def log(self, params_read: dict, metrics: dict[str, float], artifacts: list[Path], inputs: list[Path]) -> str:
        metrics = {**metrics, "stage_seconds": time.perf_counter() - self.started}
        record = StageRecord(self.stage_name, params_read, metrics, artifacts, inputs)
        return log_stage(record, self.profile, self.root)


@contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary folder that replaces ``target`` only if the block completes."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def atomic_file(target: Path) -> Iterator[Path]:
    """Yield a temporary path that replaces ``target`` only if the block completes."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}{target.suffix}")
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)

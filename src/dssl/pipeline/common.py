"""Shared machinery of the stage entry points: validation on start, atomic outputs, logging.

Every stage (1) loads and validates the whole params file before any work, (2) writes its outputs into
a temporary sibling and moves them into place only when complete, so a failure never leaves a
half-written output next to a good one (a full disk or a read-only folder: one ``WriteError`` naming the
output, exit 2, the temporary removed), and (3) logs one MLflow run with its lineage.
"""

from __future__ import annotations

import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from dssl.artifacts import WriteError, remove_quietly, write_error
from dssl.config.params import load_params
from dssl.orphans import remove_dead_temporaries
from dssl.pipeline.layout import (CHECKPOINTS, FIGURES, graph_file, partition_dir,  # noqa: F401  (stage vocabulary)
                                  prepared_dir)
from dssl.tracking import StageRecord, check_store, log_stages, project_root


def peak_rss_mb() -> float:
    """Peak resident memory of this process and of its finished children (the stage's workers), MiB."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024.0  # Linux reports KiB


class StageError(Exception):
    """A stage cannot run as asked (names what is wrong and how to fix it)."""


class Stage:
    """Context of one stage run: validated params, the entry it reads, timing and logging."""

    def __init__(self, kind: str, name: str, params_path: Path | str,
                 seeds: Callable[[dict], list[int]] | None = None):
        """``seeds(params)``: the seeds the stage runs (default the top-level ``seeds``; a grid cell's come
        from ``config.grids.cell_seeds``)."""
        self.kind = kind
        self.name = name
        self.params = load_params(params_path)
        self.root = project_root()
        check_store(self.root)   # a tracking server that does not answer: exit 69 now, not after training
        self.profile = str(self.params.get("profile", "default"))
        self.seeds = seeds(self.params) if seeds else [int(s) for s in self.params["seeds"]]
        # what a killed run of this stage left half-written in its checkpoints (its outputs' temporaries
        # go when the stage writes them: atomic_dir, atomic_file)
        remove_dead_temporaries(CHECKPOINTS / self.stage_name, recursive=True)
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
        """Log a stage that is one run (no seeds)."""
        return self.log_runs([StageRecord(self.stage_name, params_read, metrics, artifacts, inputs)])[0]

    def log_runs(self, records: list[StageRecord]) -> list[str]:
        """Log the stage's runs (one per seed, or per seed x result) in one MLflow session, once its
        outputs are written.

        Every run carries the stage's time so far (``stage_seconds``: from the entry's start, after
        imports) and its peak resident memory; returns the run ids in order. When the tracking store
        cannot be reached the runs wait in the outbox and ``TrackingUnavailable`` is raised
        (``dssl.tracking.log_stages``).
        """
        seconds, memory = time.perf_counter() - self.started, peak_rss_mb()
        for record in records:
            record.stage = self.stage_name
            record.metrics = {**record.metrics, "stage_seconds": seconds, "peak_rss_mb": memory}
        return log_stages(records, self.profile, self.root)


@contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary folder that replaces ``target`` only if the block completes.

    A write that fails (a full disk, a read-only folder; in the block's worker processes too) leaves no
    temporary folder and is a ``WriteError`` naming the output's own path (``_written``)."""
    target = Path(target)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    with _written(target, tmp):
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_temporaries(target.parent, target.name)   # of runs killed while writing it
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    try:
        with _written(target, tmp):
            yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    with _written(target, tmp):
        if target.exists():
            target.rename(old)
        tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def atomic_file(target: Path) -> Iterator[Path]:
    """Yield a temporary path that replaces ``target`` only if the block completes (a failed write: no
    temporary file left, a ``WriteError`` naming ``target``)."""
    target = Path(target)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}{target.suffix}")
    with _written(target, tmp):
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_temporaries(target.parent, target.name)   # of runs killed while writing it
    try:
        with _written(target, tmp):
            yield tmp
    except BaseException:
        remove_quietly(tmp)
        raise
    with _written(target, tmp):
        os.replace(tmp, target)


@contextmanager
def _written(target: Path, tmp: Path) -> Iterator[None]:
    """A failed write while ``tmp`` stands in for ``target``: the temporary removed, and a ``WriteError``
    (``artifacts.write_error``) naming the file as it would be under ``target``, not under the temporary
    name nobody sees. Other errors pass unchanged."""
    try:
        yield
    except Exception as caught:
        # a writer's own WriteError (outbox.write_json) names the temporary: rename from what it caught
        err = caught.__cause__ if isinstance(caught, WriteError) and caught.__cause__ is not None else caught
        named = Path(err.filename) if isinstance(err, OSError) and err.filename else None
        if named is None and isinstance(caught, WriteError) and isinstance(err, OSError):
            named = caught.path
        if named is not None and (named == tmp or tmp in named.parents):
            converted = write_error(OSError(err.errno, err.strerror, str(target / named.relative_to(tmp))), target)
        else:
            converted = write_error(err, target)
        if converted is None:
            raise
        remove_quietly(tmp)
        if converted is caught:   # a WriteError already, of a file outside the temporary (a checkpoint's)
            raise
        raise converted from err

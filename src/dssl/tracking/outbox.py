"""Runs that wait for the tracking store: written to a folder when it cannot be reached, logged later.

A stage's results are on disk before it logs; when the store (the SQLite file, or a tracking server)
cannot be reached, the runs it could not log go to ``mlflow-outbox/pending/`` as JSON files: the
run's name, params, metrics, tags (input md5s, the md5s of the outputs it describes and the code
version as they were at the time) and artifacts. ``dssl tracking sync`` logs them; the stage run again
does the same for its own runs. Neither writes anything but the outbox: a stage's outputs (DVC's) hold
no run id, a run is found by its stage and run name (``names``).

``mlflow-outbox/logged/`` remembers every run logged, by the result it describes (stage, run name,
params hash, inputs, code version: ``run_key``), so that a stage run again does not log a run twice,
whatever failed after the logging (the store, a kill).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from dssl.artifacts import writing

OUTBOX_DIR = "mlflow-outbox"


class TrackingUnavailable(RuntimeError):
    """The tracking store could not be reached; ``run_ids`` holds the ids of the runs that were logged
    (None for those waiting in the outbox)."""

    def __init__(self, message: str, run_ids: list[str | None]):
        super().__init__(message)
        self.run_ids = run_ids


def run_key(payload: dict[str, Any]) -> str:
    """The identity of a run: what it ran (stage, run name, params hash, inputs) and with which code."""
    tags = payload["tags"]
    identity = {"run_name": payload["run_name"], "profile": tags.get("profile"),
                **{k: v for k, v in tags.items() if k in ("stage", "params_hash", "git_commit", "git_dirty")
                   or k.startswith("input.")}}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


def _folder(root: Path, kind: str) -> Path:
    return Path(root) / OUTBOX_DIR / kind


def write_json(path: Path, data: Any) -> None:
    """JSON as every result file is written (one space indent, sorted keys), replaced atomically; a failed
    write (a full disk, a read-only folder) leaves no temporary file and is a ``WriteError`` naming it."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with writing(path, temporary):
        temporary.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
        os.replace(temporary, path)


def defer(root: Path, payload: dict[str, Any]) -> Path:
    """Keep a run that could not be logged, until ``sync`` or its stage run again logs it."""
    folder = _folder(root, "pending")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_key(payload)}.json"
    write_json(path, payload)
    return path


def pending(root: Path) -> list[Path]:
    folder = _folder(root, "pending")
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def logged_id(root: Path, payload: dict[str, Any]) -> str | None:
    """The run id of an identical run logged by ``sync`` or by a partly logged stage, if any."""
    path = _folder(root, "logged") / f"{run_key(payload)}.json"
    return json.loads(path.read_text())["run_id"] if path.is_file() else None


def remember(root: Path, payload: dict[str, Any], run_id: str) -> None:
    folder = _folder(root, "logged")
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / f"{run_key(payload)}.json", {"run_id": run_id, "run_name": payload["run_name"]})


def forget(root: Path, payload: dict[str, Any]) -> None:
    """Drop a waiting run once it is logged (by ``sync``, or by its stage run again: ``sync`` would log it
    twice)."""
    (_folder(root, "pending") / f"{run_key(payload)}.json").unlink(missing_ok=True)


def is_unreachable(error: BaseException) -> bool:
    """Whether a logging error means the store cannot be reached (the run can wait), rather than a run
    the store refuses (a bad value: waiting would not help)."""
    try:
        from mlflow.exceptions import MlflowException
    except ImportError:  # pragma: no cover - MLflow is a dependency
        MlflowException = ()  # type: ignore[assignment]
    if isinstance(error, MlflowException):
        return getattr(error, "error_code", "") in ("INTERNAL_ERROR", "TEMPORARILY_UNAVAILABLE",
                                                     "REQUEST_LIMIT_EXCEEDED", "ENDPOINT_NOT_FOUND")
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(names & {"OSError", "ConnectionError", "RequestException", "OperationalError", "DBAPIError",
                         "TimeoutError"})

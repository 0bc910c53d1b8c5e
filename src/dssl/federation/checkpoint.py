"""Round checkpoints: one file per run directory, replaced atomically after each completed round,
plus one file per client state that changed (``client_states``).

Layout of ``<directory>/checkpoint.pt`` (a ``torch.save`` dict):

- ``format``: CHECKPOINT_FORMAT; ``fingerprint``: hash of the run's configuration (see ``fingerprint``)
- ``completed_rounds``: rounds finished; the run resumes at this round index
- ``schedule``: the client lists of every round (FL; DecL: every client every round)
- ``global_states``: list of global state dicts (FL; several for clustered strategies)
- ``client_states``: DecL only, the stacked per-client model tensors (``StackedStates.tensors()``)
- ``client_files``: per client, the file under ``<directory>/clients/`` that holds its local state
  (the strategy's persistent per-client state), or None while it has none. A client's file is written
  after a round that changed its state and never rewritten, so a round's checkpoint writes the global
  models, the strategy state and the files of the clients that trained, nothing else
- ``strategy``: the strategy's own ``state_dict()``
- ``rng``: global torch RNG states at the end of the round, as CPU/CUDA byte tensors (the
  per-round streams are re-derived from the seed, see ``reproducibility``, so no Python or numpy
  generator state is stored; the optimizer is reset every round, so no optimizer state either)
- ``metrics``: the per-round metrics so far

Only tensors and plain Python values (dict, list, tuple, str, int, float, bool, None) are stored,
checked when saving, so that a checkpoint loads with ``torch.load(weights_only=True)``: loading it
never runs code from the file.

Every file is written to a temporary name, flushed to disk, and renamed over the old one, so a run
killed at any moment leaves either the previous or the new checkpoint, never a torn one; the client
files ``checkpoint.pt`` names are in place before it is. A write that fails (a full disk, a read-only
folder) leaves no temporary file and is a ``WriteError`` naming the file. A checkpoint that is damaged
anyway (a copy cut short) is an ``ArtifactError`` that says to delete it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

import torch

from dssl.artifacts import ArtifactError, check_keys, load_torch, writing

CHECKPOINT_FORMAT = 2  # 1 held every client's local state inside checkpoint.pt
CHECKPOINT_NAME = "checkpoint.pt"
# Keys every checkpoint holds besides format and fingerprint; plus global_states (FL) or client_states (DecL).
CHECKPOINT_KEYS = {"completed_rounds": int, "schedule": list, "client_files": list, "strategy": dict,
                   "rng": dict, "metrics": list}
MODEL_KEYS = ("global_states", "client_states")
_PLAIN = (bool, int, float, str, type(None))


class CheckpointMismatchError(RuntimeError):
    """A checkpoint exists for a different run configuration."""


def fingerprint(config: Mapping[str, Any]) -> str:
    """SHA-256 of a configuration as canonical JSON (sorted keys; non-JSON values by ``str``)."""
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def checkpoint_path(directory: Path | str) -> Path:
    return Path(directory) / CHECKPOINT_NAME


def save_checkpoint(directory: Path | str, payload: Mapping[str, Any]) -> Path:
    """Write ``payload`` atomically (temp file + fsync + os.replace) and return its path.

    A value ``torch.load(weights_only=True)`` could not read back (a numpy array or scalar, an enum,
    any other object) is a TypeError here, when it is written, not at the resume that needs it.
    """
    payload = {"format": CHECKPOINT_FORMAT, **payload}
    _check_plain(payload, "payload")
    target = checkpoint_path(directory)
    _atomic_save(target, payload)
    return target


def save_client_file(path: Path, state: Mapping[str, Any]) -> int:
    """One client's local state, written atomically to ``path``; the bytes written."""
    _check_plain(state, path.name)
    return _atomic_save(path, state)


def load_client_file(path: Path) -> dict[str, Any]:
    """A client's local state file, its tensors on the host; a damaged one is an ``ArtifactError``."""
    recovery = client_file_recovery(path)
    state = load_torch(path, map_location="cpu", recovery=recovery)
    if not isinstance(state, dict):
        raise ArtifactError(path, f"expected a dict, got {type(state).__name__}", recovery=recovery)
    return state


def client_file_recovery(path: Path) -> str:
    directory = path.parent.parent
    return (f"It holds a client's state for the checkpoint in {directory}, which only lets an interrupted run "
            f"resume: delete that checkpoint (`rm -r {directory}`) to restart the run from its first round.")


def _atomic_save(target: Path, payload: Any) -> int:
    """``torch.save`` to a temporary name, fsync, rename over ``target``; the file's size. A write that
    fails (a full disk, a read-only folder) removes the temporary and is a ``WriteError`` naming
    ``target``; the previous checkpoint stays whole."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with writing(target, temporary):
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
            size = handle.tell()
        os.replace(temporary, target)
    _fsync_directory(target.parent)
    return size


def _check_plain(value: Any, where: str) -> None:
    """Tensors and plain Python values only: what a weights-only load accepts."""
    kind = type(value)
    if kind in _PLAIN or isinstance(value, torch.Tensor):
        return
    if kind is dict:
        for key, item in value.items():
            if type(key) not in (str, int):
                raise TypeError(f"checkpoint {where}: key {key!r} must be a str or int")
            _check_plain(item, f"{where}[{key!r}]")
        return
    if kind in (list, tuple):
        for index, item in enumerate(value):
            _check_plain(item, f"{where}[{index}]")
        return
    raise TypeError(f"checkpoint {where}: {kind.__module__}.{kind.__qualname__} cannot be loaded with "
                    "weights_only=True; store it as a tensor or plain Python values")


def corrupt_recovery(path: Path) -> str:
    return (f"A checkpoint only lets an interrupted run resume: delete it (`rm {path}`) to restart "
            "the run from its first round.")


def load_checkpoint(directory: Path | str, expected_fingerprint: str,
                    device: torch.device | str = "cpu") -> dict[str, Any] | None:
    """The checkpoint in ``directory`` with its tensors on ``device`` (None if there is none).

    A checkpoint of another configuration or format is a CheckpointMismatchError; a damaged one (not
    loadable with ``weights_only=True``, or missing an entry) is an ``ArtifactError``.
    """
    path = checkpoint_path(directory)
    if not path.is_file():
        return None
    recovery = corrupt_recovery(path)
    payload = load_torch(path, map_location=device, recovery=recovery)
    if not isinstance(payload, dict):
        raise ArtifactError(path, f"expected a dict, got {type(payload).__name__}", recovery=recovery)
    if payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointMismatchError(
            f"{path} has checkpoint format {payload.get('format')!r}, this code writes {CHECKPOINT_FORMAT}; "
            "delete it or start over with on_mismatch='restart'")
    if payload.get("fingerprint") != expected_fingerprint:
        raise CheckpointMismatchError(
            f"{path} was written by a run with a different configuration (fingerprint "
            f"{str(payload.get('fingerprint'))[:12]}..., this run {expected_fingerprint[:12]}...); "
            "use another checkpoint directory, delete it, or start over with on_mismatch='restart'")
    check_keys(path, payload, CHECKPOINT_KEYS, what="entry", recovery=recovery)
    if not any(key in payload for key in MODEL_KEYS):
        raise ArtifactError(path, f"holds no model states (neither of {list(MODEL_KEYS)})", recovery=recovery)
    return payload


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; not possible on every platform (e.g. Windows).
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

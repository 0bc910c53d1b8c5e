"""Round checkpoints: one file per run directory, replaced atomically after each completed round.

Layout of ``<directory>/checkpoint.pt`` (a ``torch.save`` dict):

- ``format``: CHECKPOINT_FORMAT; ``fingerprint``: hash of the run's configuration (see ``fingerprint``)
- ``completed_rounds``: rounds finished; the run resumes at this round index
- ``schedule``: the client lists of every round (FL; DecL: every client every round)
- ``global_states``: list of global state dicts (FL; several for clustered strategies)
- ``client_states``: DecL only, the stacked per-client model tensors (``StackedStates.tensors()``)
- ``local_states``: one dict per client, the strategy's persistent per-client state
- ``strategy``: the strategy's own ``state_dict()``
- ``rng``: global torch RNG states at the end of the round (the per-round streams are re-derived
  from the seed, see ``reproducibility``)
- ``metrics``: the per-round metrics so far

The file is written to a temporary name, flushed to disk, and renamed over the old one, so a run
killed at any moment leaves either the previous or the new checkpoint, never a torn one.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

import torch

CHECKPOINT_FORMAT = 1
CHECKPOINT_NAME = "checkpoint.pt"


class CheckpointMismatchError(RuntimeError):
    """A checkpoint exists for a different run configuration."""


def fingerprint(config: Mapping[str, Any]) -> str:
    """SHA-256 of a configuration as canonical JSON (sorted keys; non-JSON values by ``str``)."""
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def checkpoint_path(directory: Path | str) -> Path:
    return Path(directory) / CHECKPOINT_NAME


def save_checkpoint(directory: Path | str, payload: Mapping[str, Any]) -> Path:
    """Write ``payload`` atomically (temp file + fsync + os.replace) and return its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    target = checkpoint_path(directory)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as handle:
        torch.save({"format": CHECKPOINT_FORMAT, **payload}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, target)
    _fsync_directory(directory)
    return target


def load_checkpoint(directory: Path | str, expected_fingerprint: str,
                    device: torch.device | str = "cpu") -> dict[str, Any] | None:
    """The checkpoint in ``directory`` with its tensors on ``device`` (None if there is none).

    A checkpoint of another configuration or format is a CheckpointMismatchError.
    """
    path = checkpoint_path(directory)
    if not path.is_file():
        return None
    payload = torch.load(path, map_location=device, weights_only=False)
    if payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointMismatchError(
            f"{path} has checkpoint format {payload.get('format')!r}, this code writes {CHECKPOINT_FORMAT}; "
            "delete it or start over with on_mismatch='restart'")
    if payload.get("fingerprint") != expected_fingerprint:
        raise CheckpointMismatchError(
            f"{path} was written by a run with a different configuration (fingerprint "
            f"{str(payload.get('fingerprint'))[:12]}..., this run {expected_fingerprint[:12]}...); "
            "use another checkpoint directory, delete it, or start over with on_mismatch='restart'")
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

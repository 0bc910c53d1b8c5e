"""Checkpoints of a training protocol: where an evaluation stopped, enough to end with the same bits.

A fine-tuning or linear-probe run saves its whole state (``Checkpoint.save``): the hyper-parameter
grid's position and the results of the grid points already done, the best model so far, the model,
optimizer and lr-schedule state of the grid point under way, the epoch and the step within it (with
that epoch's sample order), and every random stream (the protocol's generator, the global torch RNG
of CPU and CUDA). It is written after an epoch once ``every_s`` seconds have passed since the last
write (a stage passes params.yaml's ``checkpoint.every_seconds``, ``preemption.checkpoint_interval``;
default ``SAVE_EVERY_S``), and after any step once a stop was requested (``dssl.training.preemption``);
the run then raises ``Preempted``. ``Checkpoint.load`` gives it back, and the protocol continues from it
as if never stopped. A stop request therefore loses nothing; a hard kill loses at most ``every_s``
seconds and one epoch. (Writing after every epoch, ``every_s`` 0, cost two thirds of a probe's time at
the embedded scale, where an epoch of a probe head takes about a millisecond.)

One file per task, ``<folder>/checkpoint.pt``, replaced atomically (a temporary file, flushed, then
renamed), so a kill at any moment leaves the previous checkpoint or the new one. It holds tensors and
plain values only and loads with ``weights_only=True``. A checkpoint written for other inputs (another
encoder, config, seed: the ``fingerprint`` the stage computes) is ignored and overwritten; a damaged
one is an ``ArtifactError`` that says to delete it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch

from dssl.artifacts import ArtifactError, load_torch, writing
from dssl.training.preemption import SAVE_EVERY_S, requested, stop_if_requested

CHECKPOINT_NAME = "checkpoint.pt"


class Checkpoint:
    """Where one evaluation task keeps its progress, and the fingerprint of what it evaluates."""

    def __init__(self, folder: Path | str, fingerprint: str, every_s: float = SAVE_EVERY_S):
        self.folder = Path(folder)
        self.fingerprint = fingerprint
        self.every_s = every_s
        self.saves = 0
        self._last_save = time.monotonic()

    def due(self) -> bool:
        """Whether an end-of-epoch write is due (``every_s`` seconds since the last write, or creation)."""
        return time.monotonic() - self._last_save >= self.every_s

    def child(self, name: str) -> "Checkpoint":
        """The checkpoint of a sub-task in ``<folder>/<name>``, with the same fingerprint and interval."""
        return Checkpoint(self.folder / name, self.fingerprint, self.every_s)

    @property
    def path(self) -> Path:
        return self.folder / CHECKPOINT_NAME

    def load(self) -> dict[str, Any] | None:
        """The saved state of this task, or None (no checkpoint, or one of other inputs)."""
        if not self.path.is_file():
            return None
        recovery = f"delete it (`rm {self.path}`) to restart this evaluation from its first epoch"
        payload = load_torch(self.path, recovery=recovery)
        if not isinstance(payload, dict) or "state" not in payload:
            raise ArtifactError(self.path, "not an evaluation checkpoint (no 'state')", recovery=recovery)
        return payload["state"] if payload.get("fingerprint") == self.fingerprint else None

    def save(self, state: dict[str, Any]) -> None:
        """Replace the checkpoint by ``state`` atomically (a failed write: no temporary file left, a
        ``WriteError`` naming the checkpoint; the previous one stays whole)."""
        temporary = self.path.with_name(f".{CHECKPOINT_NAME}.{os.getpid()}.tmp")
        with writing(self.path, temporary):
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(temporary, "wb") as handle:
                torch.save({"fingerprint": self.fingerprint, "state": state}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        self.saves += 1
        self._last_save = time.monotonic()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def save_point(checkpoint: Checkpoint | None, state_fn, end_of_epoch: bool, where: str) -> None:
    """A safe point of a training loop: save ``state_fn()`` at the end of an epoch when a write is due,
    or whenever a stop was requested, then stop if one was (``Preempted``)."""
    if checkpoint is None:
        return
    stopping = requested()
    if (end_of_epoch and checkpoint.due()) or stopping:
        checkpoint.save(state_fn())
    if stopping:
        stop_if_requested(where)


def rng_state() -> dict[str, Any]:
    """The global torch RNG states (CPU, and every CUDA device once CUDA is in use)."""
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def cpu_state(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A copy of a state dict on the CPU (a checkpoint does not depend on the device it was taken on)."""
    return {key: value.detach().to("cpu", copy=True) for key, value in state_dict.items()}

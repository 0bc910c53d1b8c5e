"""Checkpoint-and-exit on a signal: the hook a batch scheduler's preemption uses.

A cluster stops a job at its time limit or to make room (SLURM: ``--signal=USR1@<seconds>`` ahead of
the limit, ``SIGTERM`` on preemption or ``scancel``). A stage that ``install``s this module turns either
signal into a request: training carries on to its next safe point, where the checkpoint is complete
on disk, and ``stop_if_requested`` raises ``Preempted`` there; the ``dssl`` command then exits with
``EXIT_PREEMPTED`` (75, EX_TEMPFAIL: "try again"). Run again (requeued), the stage resumes from that
checkpoint and ends with the same bits as a run never stopped.

Safe points: pretraining, after each round's checkpoint (central and stand-alone training, one round of
all their epochs: after each epoch's); fine-tuning and the linear probes, after any
optimisation step (the checkpoint is written there when a stop is requested). So the signal must come at
least one round (pretraining) or one step before the hard kill. Without a signal (a hard kill, a node
lost) a stage resumes from its last routine checkpoint, written as often as params.yaml's
``checkpoint`` section asks (``CheckpointInterval``).

Worker processes forked after ``install`` inherit the handlers; the process that receives the signal
also forwards it to its child processes, so a signal sent only to the stage's main process (SLURM's
``B:`` prefix) reaches the workers that train. A ``dssl`` command that hands its stage to the warm
server (``dssl warm``) forwards both signals to the process that runs it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from dataclasses import dataclass
from typing import Any, Mapping

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
EXIT_PREEMPTED = 75
# Seconds of training between two routine checkpoints when a params file has no ``checkpoint`` section
# (``checkpoint_interval``): a hard kill loses at most this much and one round or epoch, a stop request
# nothing (it checkpoints at once).
SAVE_EVERY_S = 60.0
CHECKPOINT_SECTION = "checkpoint"

_requested: int | None = None


@dataclass(frozen=True)
class CheckpointInterval:
    """How often a stage writes its routine checkpoints (params.yaml's ``checkpoint`` section).

    A pretraining run (FL, DecL) checkpoints after every ``every_rounds``-th round once ``every_seconds``
    seconds have passed since its last checkpoint; an evaluation task after an epoch once
    ``every_seconds`` have. Central and stand-alone training run as one round of all their epochs and
    count epochs as rounds: a checkpoint inside that round after every ``every_rounds``-th epoch once
    ``every_seconds`` have passed (``Simulator``'s ``checkpoint_epochs``). The last round, and a round,
    epoch or step after which a stop was requested, are always checkpointed. A checkpoint changes no
    result (a resumed run ends with the same bits), so the interval is no input of any stage: changing
    it re-runs nothing (it is in no stage's DVC params).
    """

    every_rounds: int = 1
    every_seconds: float = SAVE_EVERY_S


def checkpoint_interval(params: Mapping[str, Any]) -> CheckpointInterval:
    """The interval a params file sets (validated by ``dssl.config.sections.checkpoint.check_checkpoint``); the
    defaults of ``CheckpointInterval`` for a key it leaves out."""
    section = params.get(CHECKPOINT_SECTION) or {}
    default = CheckpointInterval()
    return CheckpointInterval(int(section.get("every_rounds", default.every_rounds)),
                              float(section.get("every_seconds", default.every_seconds)))


class Preempted(Exception):
    """Raised at a safe point after a stop was requested; every checkpoint is on disk."""


def install() -> None:
    """Handle ``SIGNALS`` in this process (and the workers it forks from now on), forgetting any earlier
    request: a stage calls it once as it starts. A no-op outside the main thread, where Python cannot
    install handlers."""
    if threading.current_thread() is not threading.main_thread():
        return
    reset()
    for signum in SIGNALS:
        signal.signal(signum, _on_signal)


def _on_signal(signum: int, frame) -> None:
    global _requested
    _requested = signum
    for child in multiprocessing.active_children():
        try:
            os.kill(child.pid, signum)
        except OSError:
            pass


def requested() -> bool:
    """Whether a stop was requested in this process."""
    return _requested is not None


def stop_if_requested(where: str) -> None:
    """Raise ``Preempted`` if a stop was requested; call it only where the checkpoint is complete."""
    if _requested is not None:
        raise Preempted(f"stopped by {signal.Signals(_requested).name} {where}; the checkpoint is written, "
                        "run the same command again to resume")


def reset() -> None:
    """Forget a request (tests; a process that handled its stop and goes on)."""
    global _requested
    _requested = None

"""Checkpoint-and-exit on a signal: the hook a batch scheduler's preemption uses.

A cluster stops a job at its time limit or to make room (SLURM: ``--signal=USR1@<seconds>`` ahead of
the limit, ``SIGTERM`` on preemption or ``scancel``). A stage that ``install``s this module turns either
signal into a request: training carries on to its next safe point, where the checkpoint is complete
on disk, and ``stop_if_requested`` raises ``Preempted`` there; the ``dssl`` command then exits with
``EXIT_PREEMPTED`` (75, EX_TEMPFAIL: "try again"). Run again (requeued), the stage resumes from that
checkpoint and ends with the same bits as a run never stopped.

Safe points: pretraining, after each round's checkpoint; fine-tuning and the linear probes, after any
optimisation step (the checkpoint is written there when a stop is requested, and after every epoch).
So the signal must come at least one round (pretraining) or one step before the hard kill.

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

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
EXIT_PREEMPTED = 75
# Seconds of training between two routine checkpoints of a pipeline stage (a pretraining run's rounds, an
# evaluation task's epochs): a hard kill loses at most this much, a stop request nothing (it checkpoints
# at once). Writing after every round or epoch cost up to two thirds of the time of the embedded default's
# small steps.
SAVE_EVERY_S = 60.0

_requested: int | None = None


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

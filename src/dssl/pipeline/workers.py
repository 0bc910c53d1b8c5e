"""A stage's independent tasks (its seeds, or seeds x protocols) on every core, one torch thread each.

Why processes and not threads per model: the embedded models are small, so one training step barely
speeds up with a second intra-op thread, while two seeds trained side by side take the time of one.
And a result must not depend on where it ran: CPU kernels sum in a different order with another
thread count (measured: 1 and 2 threads give different weights after 5 steps), so every task uses
exactly one thread, under DVC, Snakemake or a pool of any size, and a seed's weights are the same
bits whichever engine trained it.

How many workers: one per core, because more processes than cores cost far more than the time they share.
Measured on a 2-core EPYC (each a cold process, imports included), Table 1's 10-seed SimSiam + CNN cell
took 67-70 s with 8 workers (4 per core) and 54 s with 2, and a 10-seed evaluation 3.7 s against 3.3 s.
The exception is a count that is below two per core and leaves a remainder (3 seeds on 2 cores): one per
core would run the last one alone while a core idles, so all start at once and the operating system
shares the cores (Fig. 2a's 3-seed DecL cell: 51-54 s with 3 workers, 61-63 s with 2). Neither changes a
result, since each task still uses exactly one thread.

Workers are forked (torch is already imported, no thread pool has started: forking is safe) and
return plain results; the stage process writes outputs and logs to MLflow. A worker ends with the stage's
process, however that ends (kill -9 included: ``dssl.orphans``): an orphan would train on into the dead
stage's temporary output and then wait forever for work.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence, TypeVar

from dssl.orphans import die_with_parent

Task = TypeVar("Task")
Result = TypeVar("Result")

THREADS_PER_TASK = 1


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def client_worker_count() -> int:
    """DSSL_CLIENT_WORKERS (default 1): how many clients of an FL or DecL round train at once, each in
    its own process (``dssl.federation.parallel``). For a node with more cores than a stage has seeds,
    e.g. one seed of a 5-clients-per-round paper cell on 16 cores; the seeds then run one after another."""
    value = os.environ.get("DSSL_CLIENT_WORKERS", "1")
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"DSSL_CLIENT_WORKERS must be an integer >= 1, got {value!r}")
    return int(value)


CLIENT_STATE_STORAGES = ("host", "disk")  # dssl.federation.client_states.STORAGES (a test keeps them equal)


def client_state_storage() -> str:
    """DSSL_CLIENT_STATES (default host): where an FL or DecL run keeps its clients' local states between
    their rounds (``dssl.federation.client_states``), off the accelerator either way: ``host`` memory, or
    ``disk`` (one file per client in the run's checkpoint folder) when they do not fit in memory (100
    FedEMA clients of ResNet-18 BYOL hold 23 GiB). It changes no result."""
    value = os.environ.get("DSSL_CLIENT_STATES", "host")
    if value not in CLIENT_STATE_STORAGES:
        raise ValueError(f"DSSL_CLIENT_STATES must be one of {', '.join(CLIENT_STATE_STORAGES)}, got {value!r}")
    return value


def worker_count(tasks: int, device=None) -> int:
    """DSSL_WORKERS if set; 1 under Snakemake (it runs one job per core itself), on an accelerator
    ``device`` (one process owns it) and with client workers (a pool worker may not fork them); else
    ``pool_size`` of the tasks and cores."""
    if client_worker_count() > 1:
        wanted = 1
    elif os.environ.get("DSSL_WORKERS"):
        wanted = int(os.environ["DSSL_WORKERS"])
    elif os.environ.get("DSSL_ENGINE") == "snakemake" or (device is not None and _device_type(device) != "cpu"):
        wanted = 1
    else:
        wanted = pool_size(tasks, available_cores())
    return max(1, min(wanted, tasks))


def pool_size(tasks: int, cores: int) -> int:
    """One worker per core; all tasks at once when they are fewer than two per core and do not divide
    evenly among the cores (3 on 2 cores), so that no core idles while the last one runs (module
    docstring: the measurements behind both)."""
    if tasks < 2 * cores and tasks % cores:
        return tasks
    return cores


def _device_type(device) -> str:
    """``cpu`` / ``cuda`` of a torch.device or its name (``"cuda:0"``)."""
    return getattr(device, "type", None) or str(device).split(":")[0]


def stage_device(requests: dict[str, str]):
    """The one device a stage trains on, from its params: ``requests`` maps each params key that sets a
    device (``pretrain.fl.train.device``, ``evaluate.finetune.device``) to its value (absent: ``auto``).

    Resolved before any data is loaded, so a ``cuda`` request without a GPU stops the stage at once
    (``StageError`` naming the key); keys that resolve to different devices are refused too.
    """
    from dssl.pipeline.common import StageError
    from dssl.training.device import DeviceError, resolve_device

    try:
        devices = {key: resolve_device(value, key) for key, value in requests.items()} or {"": resolve_device()}
    except DeviceError as err:
        raise StageError(str(err)) from err
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{key} -> {device}" for key, device in devices.items())
        raise StageError(f"one stage runs on one device, but its params ask for several ({listed}); "
                         "give them the same device")
    return next(iter(devices.values()))


def _single_thread() -> None:
    import torch

    torch.set_num_threads(THREADS_PER_TASK)


def _start_worker(stage: int) -> None:
    """A pool worker's start: it dies with the stage process ``stage``, and uses one torch thread."""
    die_with_parent(stage)
    _single_thread()


def _run_one(job: tuple[Callable[[Task], Result], Task]) -> tuple[Result, float]:
    """Run one task; return its result and the worker's peak resident memory (MiB)."""
    import resource

    function, task = job
    result = function(task)
    return result, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_tasks(function: Callable[[Task], Result], tasks: Sequence[Task], device=None) -> list[tuple[Result, float]]:
    """``function(task)`` for every task, in order, with (result, peak RSS MiB) per task.

    ``function`` must be a module-level function (or a partial of one): workers receive it pickled.
    ``device``: where the tasks train (an accelerator: one task at a time, in this process).
    """
    jobs = [(function, task) for task in tasks]
    workers = worker_count(len(jobs), device)
    _single_thread()
    if workers == 1:
        return [_run_one(job) for job in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # No Pool.terminate: it ends workers with SIGTERM, which they inherit as a stop request
    # (dssl.training.preemption), so an idle worker would never end. The executor ends its workers with
    # sentinels once the tasks that started are done.
    context = multiprocessing.get_context("fork")
    # The workers are forked here, in the stage's main thread (the executor starts them all at the first
    # submit), which outlives them, as their parent-death signal requires.
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                             initargs=(os.getpid(),)) as pool:
        futures = [pool.submit(_run_one, job) for job in jobs]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()   # those not started; a started one ends, or stops at a safe point if asked
            raise

"""How the theory study's tasks run: spawned processes, each with a bounded number of BLAS threads.

Parallelism changes the wall time only, not the numbers (up to BLAS rounding across thread counts):
``n_jobs`` processes each run whole (d, seed) tasks, limited to ``blas_threads`` BLAS threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from contextlib import AbstractContextManager


def limit_blas(threads: int | None) -> AbstractContextManager:
    """A context limiting BLAS threads (threadpoolctl, a scikit-learn dependency), or a no-op."""
    import contextlib

    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=int(threads), user_api="blas")


def task_cfg(cfg: dict) -> dict:
    """cfg for worker tasks: with n_jobs > 1, one BLAS thread per process unless blas_threads is set."""
    if int(cfg["n_jobs"]) > 1 and cfg["blas_threads"] is None:
        return {**cfg, "blas_threads": 1}  # n_jobs processes must not oversubscribe the cores
    return cfg


def run_tasks(fn: Callable[..., Any], tasks: list[tuple], n_jobs: int, costs: list[float]) -> list:
    """[fn(*task) for task in tasks] in task order; in n_jobs spawned processes when n_jobs > 1."""
    n_jobs = min(int(n_jobs), len(tasks))
    if n_jobs <= 1:
        return [fn(*task) for task in tasks]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    order = sorted(range(len(tasks)), key=lambda k: -costs[k])  # most expensive first balances load
    with ProcessPoolExecutor(n_jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {k: pool.submit(fn, *tasks[k]) for k in order}
        return [futures[k].result() for k in range(len(tasks))]

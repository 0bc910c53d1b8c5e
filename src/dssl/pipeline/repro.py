"""``dssl repro``: what ``dvc repro`` does, with independent stages running at the same time.

``dvc repro`` runs one stage after another. Measured on a 2-core EPYC, the embedded default's 129
stages kept the two cores busy 90 % of the time: light stages (code, partitions, features, report), the
start and the MLflow logging of every stage, and DVC's own bookkeeping between stages ran on one core
while the other waited (docs/reproducibility.md).

DVC's, unchanged: which stages are considered (DVC's plan for the pipeline file, ``plan_repro``); that a
stage runs only if DVC finds it changed, checked once every stage it reads from is done (as ``dvc repro``
checks); the run cache; and what is recorded: a finished stage is saved, committed to the cache and
written to its dvc.lock before any stage that reads it starts, and git stages the lock files as
``dvc repro`` would (``core.autostage``).

New: up to ``jobs`` stage commands run at once. A thread per running stage only waits for its process;
every DVC call stays in the main thread, which holds the repository lock from start to end (no other
DVC command can change the workspace meanwhile).

Results do not depend on it: every task of a stage uses exactly one thread (``dssl.pipeline.workers``),
so a stage gives the same bits however many stages run beside it and however many worker processes it
has. Each stage gets one slot and trains its seeds one after another (``DSSL_WORKERS=1``), as under
Snakemake; when more slots are free than stages are ready (the start and the end of a run), the stage
started gets the spare slots as worker processes, so no core waits. Ready stages start by rank: their
estimated cost (``estimated_cost``, from the params) plus that of the costliest chain of stages reading
from them, so that neither a long stage nor a light one that unblocks long ones starts last. DVC
decides a stage only when a slot is free for it, so its checks run while other stages compute.

A failing stage: no new stage starts, the running ones finish and are recorded (nothing already
produced is lost), then the command fails naming the failed stages, as ``dvc repro`` does.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from queue import Queue
from typing import Mapping

from dssl.config.grids import seeds_at
from dssl.config.study import Study
from dssl.pipeline.catalogue import StageInstance, instances
from dssl.pipeline.workers import pool_size

FRAMEWORKS = {"pretrain_fl": "fl", "pretrain_decl": "decl", "pretrain_central": "central", "pretrain_local": "local"}


class ReproError(Exception):
    """A stage failed (its command, or DVC recording its outputs); names the stages."""


class ReproBusy(ReproError):
    """Another DVC command (a first ``dssl repro``) holds the project's lock: nothing was started."""


def _busy(root: Path) -> ReproBusy:
    """The one line for a project whose DVC lock is held, with the holder's PID (DVC's lock file holds it)."""
    lock = Path(root) / ".dvc" / "tmp" / "lock"
    try:
        pid = lock.read_text().strip() or "unknown"
    except OSError:
        pid = "unknown"
    return ReproBusy(f"another `dssl repro` or DVC command (PID {pid}) is running in {root} and holds its lock "
                     f"({lock}); wait for it to end, or stop it with `kill {pid}`, then run this again")


def estimated_cost(stage: StageInstance, params: dict, study: Study | None = None) -> float:
    """A relative estimate of a stage's compute, only to order the stages: seeds x passes over the
    training data (an FL round: clients per round x local epochs / clients; a DecL round: local epochs;
    central and stand-alone: epochs) of the cell's schedule (``Study.schedule``; ``study``: the params'
    study, read once by the caller of many stages); an evaluation counts a pass per seed, a light stage
    nothing."""
    if not stage.kind.training:
        return 0.0
    seeds = task_count(stage, params)
    framework = FRAMEWORKS.get(stage.kind.name)
    if framework is None:
        return float(seeds)
    train = (study or Study.from_params(params)).schedule(framework, stage.fields.get("strategy"))
    if framework == "fl":
        clients = ((params.get("partitions") or {}).get(stage.fields.get("partition")) or {}).get("clients") or 1
        passes = (train.get("rounds", 1) * train.get("clients_per_round", clients)
                  * train.get("local_epochs", 1) / clients)
    elif framework == "decl":
        passes = train.get("rounds", 1) * train.get("local_epochs", 1)
    else:
        passes = train.get("epochs", 1)
    return float(seeds * passes)


def default_jobs(cores: int, device_type: str) -> int:
    """Stages at once by default: one per core on a CPU; one when the stages train on an accelerator
    (``auto`` resolves to it), since each training stage owns the device (``profiles/gpu-local``: gpu=1)."""
    return cores if device_type == "cpu" else 1


def task_count(stage: StageInstance, params: dict) -> int:
    """How many worker processes a stage can use: its seeds for training and evaluation stages, else 1."""
    if not stage.kind.training:
        return 1
    key = stage.fields.get("seeds_key")
    return len(seeds_at(params, key)) if key else len(params.get("seeds") or [0])


@dataclass(eq=False)  # nodes are told apart by identity (they are dict keys)
class _Node:
    stage: object                       # dvc.stage.Stage
    upstream: list                      # every DVC stage it reads from (DVC's ``changed`` wants them all)
    cost: float = 0.0
    tasks: int = 1
    rank: float = 0.0                   # its cost plus the costliest chain of stages reading from it
    order: int = 0                      # DVC's plan order (ties)
    waiting: set = field(default_factory=set)


def stage_sizes(params: dict) -> dict[str, tuple[float, int]]:
    """Per stage name (as DVC names it): its ``estimated_cost`` and ``task_count``."""
    study = Study.from_params(params)
    return {stage.name: (estimated_cost(stage, params, study), task_count(stage, params))
            for stage in instances(params)}


def _plan(repo, targets: list[str], sizes: Mapping[str, tuple[float, int]]) -> list[_Node]:
    """DVC's plan (its order: ties), each stage ranked by the costliest chain of stages it starts: its
    own cost plus that of the costliest stage reading from it, and so on (a light stage that unblocks
    long ones, such as the partitions, ranks above them)."""
    from dvc.repo.reproduce import collect_stages, get_active_graph, plan_repro

    graph = get_active_graph(repo.index.graph)
    steps = plan_repro(graph, collect_stages(repo, [str(Path(repo.root_dir) / target) for target in targets]))
    planned = set(steps)
    nodes = {}
    for order, stage in enumerate(steps):
        cost, tasks = sizes.get(stage.name, (0.0, 1))
        upstream = list(graph.successors(stage))   # DVC's edges run from a stage to what it reads
        nodes[stage] = _Node(stage, upstream, cost=cost, tasks=tasks, order=order, waiting=set(upstream) & planned)
    for stage in reversed(steps):                  # readers first: the plan lists a stage after its inputs
        readers = [nodes[r].rank for r in graph.predecessors(stage) if r in planned]
        nodes[stage].rank = nodes[stage].cost + max(readers, default=0.0)
    return list(nodes.values())


def _say(message: str) -> None:
    print(message, flush=True)


def reproduce(root: Path, targets: list[str], jobs: int, sizes: Mapping[str, tuple[float, int]] | None = None) -> int:
    """Reproduce ``targets`` (pipeline files, relative to ``root``) with up to ``jobs`` stages at once;
    returns how many ran (or were restored from DVC's cache). Raises ReproError naming the failed
    stages, once the others have finished and been recorded. ``sizes``: ``stage_sizes`` of the params
    (else every stage counts as light: one slot, DVC's order)."""
    from dvc.lock import LockError
    from dvc.repo import Repo

    with contextlib.chdir(root):  # DVC resolves stage paths from the working directory
        repo = Repo(str(root))
        try:
            run = _reproduce(repo, targets, jobs, sizes or {})
        except LockError:   # taken before any stage starts: nothing ran
            raise _busy(root) from None
    if run.failed:
        names = ", ".join(f"'{name}'" for name, _ in run.failed)
        blocked = f"; {len(run.pending)} stages after them did not run" if run.pending else ""
        raise ReproError(f"failed to reproduce {names}{blocked}") from run.failed[0][1]
    return len(run.ran)


def _reproduce(repo, targets: list[str], jobs: int, sizes: Mapping[str, tuple[float, int]]) -> "_Run":
    from dvc.repo import lock_repo

    with lock_repo(repo), repo.scm_context():
        run = _Run(repo, _plan(repo, targets, sizes), max(1, jobs))
        run.until_done()
    return run


class _Run:
    """One reproduction: DVC calls in this (the main) thread, one waiting thread per running command."""

    def __init__(self, repo, nodes: list[_Node], slots: int) -> None:
        self.repo = repo
        self.pending = nodes                  # not started or skipped yet (some wait for their inputs)
        self.running: dict[_Node, tuple[float, int]] = {}
        self.free = slots
        self.finished: Queue = Queue()
        self.ran: list[str] = []
        self.failed: list[tuple[str, BaseException]] = []

    def until_done(self) -> None:
        while True:
            if not self.failed:
                self._fill_slots()
            if not self.running:
                return  # every stage done, or the rest read from a failed one
            self._collect()

    def _fill_slots(self) -> None:
        """While a slot is free: take the highest-ranked stage whose inputs are recorded; skip it when DVC
        finds it unchanged, restore it when DVC's cache holds its outputs, else start it. Deciding only
        when a slot is free keeps DVC's checks (~50 ms a stage) behind the running stages."""
        while self.free and not self.failed:
            ready = [n for n in self.pending if not n.waiting]
            if not ready:
                return
            node = min(ready, key=lambda n: (-n.rank, n.order))
            self.pending.remove(node)
            if self._needs_run(node):
                self._start(node, others=len(ready) - 1)

    def _needs_run(self, node: _Node) -> bool:
        """DVC's decision (``Stage.reproduce``, ``run_stage``); a stage skipped or restored is done."""
        from dvc.stage.cache import RunCacheNotFoundError

        if not node.stage.changed(upstream=node.upstream):
            self._done(node)
            return False
        node.stage.remove_outs(ignore_remove=False, force=False)
        try:
            self.repo.stage_cache.restore(node.stage)
        except RunCacheNotFoundError:
            return True
        try:
            _record(node.stage)
        except Exception as err:  # noqa: BLE001 - as a failed command
            self._fail(node, err)
            return False
        self.ran.append(node.stage.addressing)
        self._done(node)
        return False

    def _start(self, node: _Node, others: int) -> None:
        """Run the stage's command in a thread, on one slot, or on the spare ones when fewer other stages
        are ready than slots are free: its tasks in that many worker processes (``pool_size``: 3 seeds
        on 2 spare slots all run at once)."""
        from dvc.stage.run import cmd_run

        spare = self.free - others
        workers = pool_size(node.tasks, spare) if spare > 1 else 1
        slots = min(workers, max(1, spare))
        self.free -= slots
        self.running[node] = (time.monotonic(), slots)
        node.stage.save_deps()

        def execute() -> None:
            try:
                cmd_run(node.stage, run_env={"DSSL_WORKERS": str(workers)})
                self.finished.put((node, None))
            except BaseException as err:  # noqa: BLE001 - reported by the main thread
                self.finished.put((node, err))

        threading.Thread(target=execute, daemon=True).start()

    def _collect(self) -> None:
        """Wait for one command to end and record its stage (or the failure)."""
        node, error = self.finished.get()
        started, slots = self.running.pop(node)
        self.free += slots
        try:
            if error is not None:
                raise error
            _record(node.stage)
        except Exception as err:  # noqa: BLE001 - a failed stage stops the run once the others end
            self._fail(node, err)
            return
        self.ran.append(node.stage.addressing)
        _say(f"Stage '{node.stage.addressing}' done: {time.monotonic() - started:.1f} s on {slots} "
             f"core{'s' if slots > 1 else ''}")
        self._done(node)

    def _fail(self, node: _Node, err: BaseException) -> None:
        self.failed.append((node.stage.addressing, err))
        _say(f"ERROR: stage '{node.stage.addressing}' failed: {err}")

    def _done(self, node: _Node) -> None:
        for other in self.pending:
            other.waiting.discard(node.stage)


def _record(stage) -> None:
    """What DVC does after a stage's command (``Stage.run``, then ``_reproduce_stage``): its run cache
    entry only when every output is cached (metrics and plots aside), as there."""
    uncached = any(not out.use_cache for out in stage.outs if not (out.is_metric or out.is_plot))
    stage.save(run_cache=not uncached)
    stage.commit()
    stage.dump(update_pipeline=False)

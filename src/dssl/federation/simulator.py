"""The machinery the FL and DecL round loops share (``Simulator``): per-client training, the round
loop, metrics, checkpoints and resumption, on one worker model. ``fl.FLSimulator`` and
``decl.DecLSimulator`` add how a round chooses, trains and combines its clients.

One model instance (the SSL method) trains every client in turn: a client's starting state is copied
into it in place, trained, and its shared tensors are cloned for aggregation. No per-client model
copies, no per-round optimizer construction (see ``local``), one host sync per client.

Both write a checkpoint after each completed round (``checkpoint``) and resume from it, so a killed
run continues to the same final weights, bit for bit, as an uninterrupted one (same hardware). What
each client keeps between rounds lives off the training device (``client_states``: in host memory or
on disk) and reaches the device only for the round the client trains; a round's checkpoint writes the
global (or stacked DecL) models, the strategy state and the states of the clients that trained.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from dssl.federation.checkpoint import CheckpointMismatchError, fingerprint, load_checkpoint, save_checkpoint
from dssl.federation.client_states import ClientStates, check_storage
from dssl.federation.local import (
    ClientData,
    LocalProgress,
    LocalResult,
    TrainStep,
    build_optimizer,
    reset_optimizer,
    round_lr,
    train_client,
)
from dssl.federation.parallel import ClientOutcome, ClientTask, ClientWorkers, check_worker_count
from dssl.federation.reproducibility import (
    Stream,
    configure_determinism,
    derive_seed,
    global_rng_state,
    set_global_rng_state,
    seed_global_rng,
    torch_generator,
)
from dssl.federation.run_result import RunResult
from dssl.federation.state import StateDict, load_state_, snapshot, state_digest
from dssl.federation.strategies.base import ClientContext, Strategy, Upload
from dssl.federation.train_config import TrainConfig
from dssl.training import preemption

logger = logging.getLogger(__name__)

ON_MISMATCH = ("error", "restart")
RoundCallback = Callable[[dict], None]


def progress_enabled() -> bool:
    """Progress bars only for a person watching: not under CI, not when stderr is redirected."""
    return not os.environ.get("CI") and sys.stderr.isatty()


class Simulator:
    """Shared machinery: per-client training, round loop, metrics, checkpoints.

    ``method``: the SSL method (``dssl.methods``), already on the training device; it is trained in
    place. ``clients``: one ``ClientData`` each (``clients_from_partition``). ``checkpoint_dir``: where
    to checkpoint and resume (None: no checkpoints). ``run_config``: whatever else identifies the run
    (dataset, partition and graph hashes, method hyper-parameters); it enters the fingerprint a
    checkpoint must match. ``on_mismatch``: ``error`` refuses a foreign checkpoint, ``restart``
    trains from scratch and overwrites it. ``client_workers``: how many clients of a round train at once,
    each in a forked CPU process with one torch thread (``dssl.federation.parallel``); 1 trains them one
    after another in this process. It changes the wall time only, so it is not part of the fingerprint:
    with one torch thread here too, the weights are the same bits either way. ``client_states``: where
    the clients' local states live between their rounds, ``host`` memory or ``disk`` (``client_states``
    module); it changes neither the result nor the fingerprint. ``checkpoint_interval_s``: a round due
    by ``config.checkpoint_every`` is checkpointed only once this many seconds have passed since the last
    checkpoint (0: every due round); the last round, and a round after which a stop was requested
    (``dssl.training.preemption``), always are. Neither changes the result. ``checkpoint_epochs``: a run
    whose rounds train one client each in this process (central and stand-alone training: one round of
    all their epochs) also checkpoints inside a round, after every ``checkpoint_epochs``-th epoch once
    ``checkpoint_interval_s`` have passed, and after the epoch under way when a stop was requested (then
    it stops, ``Preempted``); 0: only after rounds. It changes no result either: the checkpoint holds the
    model, optimizer, generator and loss-sum states the rest of the round continues from.
    """

    kind = "base"

    def __init__(
        self,
        method: nn.Module,
        clients: Sequence[ClientData],
        strategy: Strategy,
        config: TrainConfig,
        *,
        checkpoint_dir: Path | str | None = None,
        run_config: Mapping[str, Any] | None = None,
        on_mismatch: str = "error",
        client_workers: int = 1,
        client_states: str = "host",
        checkpoint_interval_s: float = 0.0,
        checkpoint_epochs: int = 0,
    ):
        config.validate()
        check_storage(client_states)
        if on_mismatch not in ON_MISMATCH:
            raise ValueError(f"on_mismatch must be one of {ON_MISMATCH}, got {on_mismatch!r}")
        if not clients:
            raise ValueError("no clients")
        frameworks = strategy.spec.frameworks
        if self.kind not in frameworks:
            raise ValueError(f"strategy {strategy.name!r} runs in {', '.join(frameworks)}, not {self.kind}")
        self.method = method
        self.clients = list(clients)
        self.strategy = strategy
        self.config = config
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.checkpoint_interval_s = checkpoint_interval_s
        self.checkpoint_epochs = checkpoint_epochs
        self._epoch_resume: dict | None = None   # the mid-round part of the checkpoint resumed from
        self._last_checkpoint = time.monotonic()
        self.on_mismatch = on_mismatch
        self.device = next(method.parameters()).device
        check_worker_count(client_workers, self.device)
        self.client_workers = client_workers
        self._workers: ClientWorkers | None = None
        strategy.setup(method)
        self.initial_state = snapshot(method)
        self.optimizer = build_optimizer(method, config.optimizer, config.optimizer.lr(config.batch_size))
        # After the initial snapshot: channels-last and compilation leave values and keys unchanged.
        self.train_step = TrainStep(method, self.optimizer, config.step_options())
        self.schedule = self._make_schedule()
        self._check_epoch_checkpoints()
        self.metrics: list[dict] = []
        self.completed_rounds = 0
        self._train_time = 0.0
        self.fingerprint = fingerprint(self._fingerprint_items(run_config or {}))
        self.local_states = ClientStates(len(self.clients), client_states, self.checkpoint_dir, self.fingerprint)

    def _check_epoch_checkpoints(self) -> None:
        """Epoch checkpoints need a round's whole state in this process: one client per round, no workers."""
        if self.checkpoint_epochs < 0:
            raise ValueError(f"checkpoint_epochs must be >= 0, got {self.checkpoint_epochs}")
        if self.checkpoint_epochs and (self.client_workers > 1 or any(len(chosen) > 1 for chosen in self.schedule)):
            raise ValueError("checkpoint_epochs needs rounds of one client trained in this process "
                             "(clients_per_round 1, client_workers 1)")

    # -- subclass hooks ---------------------------------------------------------------------------

    def _make_schedule(self) -> list[list[int]]:
        raise NotImplementedError

    def _run_round(self, round_index: int) -> tuple[list[LocalResult], dict]:
        raise NotImplementedError

    def _model_payload(self) -> dict:
        raise NotImplementedError

    def _restore_models(self, payload: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _result_states(self) -> tuple[StateDict, list[StateDict], int]:
        """The model to evaluate, the global states, and which global state the first one is."""
        raise NotImplementedError

    # -- the run ----------------------------------------------------------------------------------

    def run(self, on_round_end: RoundCallback | None = None) -> RunResult:
        """Run (or resume) to ``config.rounds`` and return the final model and per-round metrics.

        Each metrics record: ``round`` (1-based), ``loss`` and any other scalar the loss dict returns
        (means over the round's clients of their per-step means), ``clients``, ``steps``, ``images``,
        ``train_time_s`` (local training summed over clients: above the wall time when clients train at
        once), ``wall_time_s`` (the whole round before the checkpoint),
        ``images_per_s`` (images / wall time), ``checkpoint_s`` and ``checkpoint_bytes`` (what the round's
        checkpoint wrote; 0 without one), and extras of the simulator kind.
        ``on_round_end`` is called with each record after its checkpoint is written.
        """
        configure_determinism(self.config.deterministic)
        resumed = self._resume()
        total = self.config.rounds
        logger.info("%s run %s: rounds %d-%d of %d; client schedule %s", self.kind, self.fingerprint[:12],
                    resumed + 1, total, total, self.schedule)
        with self._client_workers(), tqdm(total=total, initial=self.completed_rounds, desc=f"{self.kind} rounds",
                                          unit="round", disable=not progress_enabled(), file=sys.stderr) as bar:
            for round_index in range(self.completed_rounds, total):
                record = self._timed_round(round_index)
                self.completed_rounds = round_index + 1
                self.metrics.append(record)
                record["checkpoint_s"], record["checkpoint_bytes"] = self._maybe_checkpoint()
                if on_round_end is not None:
                    on_round_end(record)
                bar.set_postfix(loss=f"{record.get('loss', float('nan')):.4f}")
                bar.update(1)
        final_state, global_states, final_index = self._result_states()
        return RunResult(final_state, global_states, list(self.metrics), self.schedule, resumed, self.fingerprint,
                         final_index)

    @contextlib.contextmanager
    def _client_workers(self) -> Iterator[None]:
        """Worker processes for the run, when ``client_workers`` > 1 and a round has several clients."""
        count = min(self.client_workers, max(map(len, self.schedule[self.completed_rounds:]), default=1))
        if count <= 1:
            yield
            return
        with ClientWorkers(self.train_task, self.strategy, count) as workers:
            self._workers = workers
            try:
                yield
            finally:
                self._workers = None

    def _timed_round(self, round_index: int) -> dict:
        self._train_time = 0.0
        start = time.perf_counter()
        results, extras = self._run_round(round_index)
        wall = time.perf_counter() - start
        trained = [r for r in results if r.steps]
        record: dict[str, Any] = {"round": round_index + 1}
        for key in sorted({k for r in trained for k in r.losses}):
            values = [r.losses[key] for r in trained if key in r.losses]
            record[key] = float(np.mean(values))
        if not trained:  # no client trained (Orchestra's round 0 only clusters): no loss to report
            record["loss"] = float("nan")
        images = sum(r.images for r in results)
        record.update(clients=len(results), steps=sum(r.steps for r in results), images=images,
                      train_time_s=self._train_time, wall_time_s=wall, images_per_s=images / wall, **extras)
        return record

    def _train_clients(self, tasks: Sequence[ClientTask], round_states: Sequence[StateDict] = (),
                       receive: Callable[[ClientTask, Upload], None] | None = None) -> list[tuple[Upload, LocalResult]]:
        """Train ``tasks`` (one after another, or at once on the worker processes); their uploads and
        results in task order. ``receive(task, upload)`` sees each upload, in task order, as it arrives."""
        trained: list[tuple[Upload, LocalResult]] = []

        def deliver(position: int, outcome: ClientOutcome) -> None:
            task = tasks[position]
            self.local_states.put(task.client_id, outcome.local_state, task.round_index)
            self._train_time += outcome.train_time_s
            if receive is not None:
                receive(task, outcome.upload)
            trained.append((outcome.upload, outcome.result))

        if self._workers is None:
            for position, task in enumerate(tasks):
                local_state = self.local_states.fetch(task.client_id, self.device)
                deliver(position, self.train_task(task, round_states, local_state))
        else:
            self._workers.train(tasks, round_states, self.local_states, deliver)
        return trained

    def train_task(self, task: ClientTask, round_states: Sequence[StateDict], local_state: dict) -> ClientOutcome:
        """One client's round: start state from the strategy, seeded local training, upload. The task's
        own start models if it carries them, else the round's. ``local_state`` (what the strategy keeps
        on the client between rounds) is updated in place and returned in the outcome. The worker
        processes (``parallel``) run this same method."""
        client_id, round_index = task.client_id, task.round_index
        global_states = task.global_states or round_states
        seed, data = self.config.seed, self.clients[client_id]
        generator = torch_generator(derive_seed(seed, round_index, client_id, Stream.MODEL), self.device)
        ctx = ClientContext(client_id, round_index, self.config.rounds, task.participation, data, self.device,
                            generator, expected_participations=sum(map(len, self.schedule)) / len(self.clients))
        ctx.model_index = self.strategy.select_global(client_id, global_states, local_state, ctx)
        start = self.strategy.client_update_start(client_id, global_states[ctx.model_index], local_state, ctx)
        load_state_(self.method, start)
        reset_optimizer(self.optimizer, round_lr(self.config.optimizer, self.config.batch_size,
                                                 round_index, self.config.rounds))
        # Randomness outside the method's generator (dropout, drop-path) draws from the global RNG.
        seed_global_rng(derive_seed(seed, round_index, client_id, Stream.GLOBAL), self.device)
        began = time.perf_counter()
        generators = {"model": generator,
                      "shuffle": torch_generator(derive_seed(seed, round_index, client_id, Stream.SHUFFLE)),
                      "augment": torch_generator(derive_seed(seed, round_index, client_id, Stream.AUGMENT),
                                                 self.device)}
        result = train_client(
            self.method, self.optimizer, data,
            lambda images: self.strategy.client_loss(self.method, images, ctx),
            epochs=self.config.local_epochs if self.strategy.trains(ctx) else 0, batch_size=self.config.batch_size,
            drop_last=self.config.drop_last, shuffle_generator=generators["shuffle"],
            augment_generator=generators["augment"], device=self.device, step=self.train_step,
            start=self._restore_epoch(task, generators),
            on_epoch_end=self._epoch_checkpointer(task, generators) if self.checkpoint_epochs else None,
        )
        train_time = time.perf_counter() - began
        upload = self.strategy.client_upload(client_id, self.method, local_state, ctx)
        return ClientOutcome(upload, result, local_state, train_time)

    # -- checkpoints ------------------------------------------------------------------------------

    def _fingerprint_items(self, run_config: Mapping[str, Any]) -> dict:
        clients = hashlib.sha256()
        for data in self.clients:
            clients.update(np.asarray(data.indices, dtype=np.int64).tobytes())
            settings = sorted(getattr(data.augment, "__dict__", {}).items())
            clients.update(f"{type(data.augment).__name__}{settings};".encode())
        config = self.config.identity()
        return {
            "kind": self.kind,
            "config": config,
            "strategy": {"name": self.strategy.name, "hparams": self.strategy.hparams},
            "method": f"{type(self.method).__module__}.{type(self.method).__qualname__}",
            "initial_state": state_digest(self.initial_state),
            "clients": clients.hexdigest(),
            "run": dict(run_config),
        }

    def _resume(self) -> int:
        """Load the checkpoint of this configuration if there is one; return the rounds it holds."""
        if self.checkpoint_dir is None:
            return 0
        try:
            payload = load_checkpoint(self.checkpoint_dir, self.fingerprint, self.device)
        except CheckpointMismatchError:
            if self.on_mismatch == "restart":
                return 0  # overwritten by this run's first checkpoint
            raise
        if payload is None:
            return 0
        if payload["schedule"] != self.schedule:
            raise CheckpointMismatchError(f"{self.checkpoint_dir}: stored client schedule differs from this run's")
        self._restore_models(payload)
        self.local_states.restore(payload["client_files"])
        self.strategy.load_state_dict(payload["strategy"])
        self.metrics = payload["metrics"]
        self.completed_rounds = payload["completed_rounds"]
        set_global_rng_state(payload["rng"])
        self._epoch_resume = payload.get("epoch")
        return self.completed_rounds

    def _maybe_checkpoint(self) -> tuple[float, int]:
        """Checkpoint when due: seconds taken and bytes written (the changed client states first, then
        checkpoint.pt naming them, then the client files it no longer names are deleted)."""
        every, done = self.config.checkpoint_every, self.completed_rounds
        if self.checkpoint_dir is None:
            return 0.0, 0
        recent = time.monotonic() - self._last_checkpoint < self.checkpoint_interval_s
        if (done % every or recent) and done != self.config.rounds and not preemption.requested():
            return 0.0, 0
        start = time.perf_counter()
        written = self._write_checkpoint()
        return time.perf_counter() - start, written

    def _write_checkpoint(self, **extra: Any) -> int:
        """The checkpoint of the completed rounds (plus ``extra``: a round's progress); bytes written."""
        client_bytes = self.local_states.write_changed()
        path = save_checkpoint(self.checkpoint_dir, {
            "fingerprint": self.fingerprint,
            "completed_rounds": self.completed_rounds,
            "schedule": self.schedule,
            "client_files": self.local_states.files(),
            "strategy": self.strategy.state_dict(),
            "rng": global_rng_state(),
            "metrics": self.metrics,
            **self._model_payload(),
            **extra,
        })
        self.local_states.commit()
        self._last_checkpoint = time.monotonic()
        return client_bytes + path.stat().st_size

    def _epoch_checkpointer(self, task: ClientTask,
                            generators: Mapping[str, torch.Generator]) -> Callable[[LocalProgress], None]:
        """``train_client``'s epoch hook: the checkpoint inside a round, when due or asked for (then stop).

        It holds the round's progress (key ``epoch``: client, round, counts, loss sums) and everything the
        rest of the round draws on: the method's whole state, the optimizer's, the three generators and
        the global RNG. The round's last epoch is left to the round's own checkpoint."""
        def save(progress: LocalProgress) -> None:
            if self.checkpoint_dir is None or progress.epochs == self.config.local_epochs:
                return
            recent = time.monotonic() - self._last_checkpoint < self.checkpoint_interval_s
            if (progress.epochs % self.checkpoint_epochs or recent) and not preemption.requested():
                return
            self._write_checkpoint(epoch={
                "client": task.client_id, "round": task.round_index, "epochs": progress.epochs,
                "steps": progress.steps, "images": progress.images, "sums": progress.sums,
                "method": snapshot(self.method), "optimizer": self.optimizer.state_dict(),
                "generators": {name: g.get_state() for name, g in generators.items()}, "rng": global_rng_state()})
            preemption.stop_if_requested(f"after epoch {progress.epochs} of round {task.round_index + 1}")
        return save

    def _restore_epoch(self, task: ClientTask, generators: Mapping[str, torch.Generator]) -> LocalProgress | None:
        """The progress of ``task``'s round from the checkpoint resumed from, its states restored (None: the
        checkpoint holds no part of this round; it is used once)."""
        saved = self._epoch_resume
        if saved is None or (saved["client"], saved["round"]) != (task.client_id, task.round_index):
            return None
        self._epoch_resume = None
        load_state_(self.method, saved["method"])
        self.optimizer.load_state_dict(saved["optimizer"])
        for name, generator in generators.items():
            generator.set_state(saved["generators"][name].cpu())
        set_global_rng_state(saved["rng"])
        return LocalProgress(saved["epochs"], saved["steps"], saved["images"], dict(saved["sums"]))

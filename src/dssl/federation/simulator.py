"""FL and DecL simulators: rounds of local training and aggregation on one worker model.

One model instance (the SSL method) trains every client in turn: a client's starting state is copied
into it in place, trained, and its shared tensors are cloned for aggregation. No per-client model
copies, no per-round optimizer construction (see ``local``), one host sync per client.

- ``FLSimulator``: paper A's Algorithm 1 / FedAvg. Each round K of N clients, drawn uniformly without
  replacement (the whole schedule is drawn up front from the seed), train E epochs from the global
  model; the server aggregates their uploads.
- ``DecLSimulator``: paper A's Algorithm 2. Each round all clients average with their neighbours at
  once, X <- W X with the row-stochastic mixing matrix W (``dssl.topology.mixing``), then every client
  trains E epochs from its mixed model (order ``mix_then_train``, Alg. 2 line 10); paper A's code
  trains first, then mixes (order ``train_then_mix``). The final model is the average of all clients
  (``Strategy.aggregation_weights``). With a column-stochastic push-sum matrix P each client also
  keeps a push-sum weight w_i (Kempe et al. 2003; Assran et al., Stochastic Gradient Push, 2019): rows
  hold x_i, a client trains from x_i / w_i, its update is added to x_i, and x <- P x, w <- P w.

Both write a checkpoint after each completed round (``checkpoint``) and resume from it, so a killed
run continues to the same final weights, bit for bit, as an uninterrupted one (same hardware). What
each client keeps between rounds lives off the training device (``client_states``: in host memory or
on disk) and reaches the device only for the round the client trains; a round's checkpoint writes the
global (or stacked DecL) models, the strategy state and the states of the clients that trained.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from dssl.federation.checkpoint import CheckpointMismatchError, fingerprint, load_checkpoint, save_checkpoint
from dssl.federation.client_states import ClientStates, check_storage, to_device
from dssl.federation.local import (
    ClientData,
    LocalProgress,
    LocalResult,
    OptimizerConfig,
    StepOptions,
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
from dssl.federation.state import StackedStates, StateDict, load_state_, snapshot, state_digest
from dssl.federation.strategies.base import LOCAL_MODEL, ClientContext, Strategy, Upload
from dssl.topology.mixing import ORDERS
from dssl.training import preemption

logger = logging.getLogger(__name__)

ON_MISMATCH = ("error", "restart")
RoundCallback = Callable[[dict], None]


@dataclass(frozen=True)
class TrainConfig:
    """Settings shared by FL and DecL (paper A, appendix A.2 for the paper-scale values).

    ``precision`` (``fp32`` | ``bf16``), ``channels_last`` and ``compile`` choose how each local step
    runs (``local.StepOptions``: bf16 autocast, channels-last memory format, ``torch.compile``). They
    are off by default, which is the plain fp32 step every existing result was produced with.
    """

    rounds: int
    local_epochs: int = 1
    batch_size: int = 32
    seed: int = 0
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    drop_last: bool = True
    deterministic: bool = True
    checkpoint_every: int = 1  # rounds between checkpoints; the last round is always saved
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        """Build from a params mapping; ``optimizer`` may be a nested mapping."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise TypeError(f"unknown {cls.__name__} keys {sorted(unknown)}; known: {sorted(known)}")
        values = dict(values)
        if isinstance(values.get("optimizer"), Mapping):
            values["optimizer"] = OptimizerConfig.from_dict(values["optimizer"])
        return cls(**values)

    def validate(self) -> None:
        for name in ("rounds", "local_epochs", "batch_size", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        self.step_options().validate()

    def step_options(self) -> StepOptions:
        """The local step's options (``precision``, ``channels_last``, ``compile``)."""
        return StepOptions(self.precision, self.channels_last, self.compile)

    def identity(self) -> dict[str, Any]:
        """The settings that decide a run's result, for the checkpoint fingerprint.

        ``checkpoint_every`` does not change the result. Step options enter only when not at their
        default, so runs with the plain step keep the fingerprints (and checkpoints) they had before
        these options existed; a bf16, channels-last or compiled run never resumes a plain one.
        """
        values = dataclasses.asdict(self)
        values.pop("checkpoint_every")
        default = StepOptions()
        for name in ("precision", "channels_last", "compile"):
            if values[name] == getattr(default, name):
                values.pop(name)
        return values


@dataclass(frozen=True)
class FLConfig(TrainConfig):
    clients_per_round: int = 5


DECL_ORDERS = ORDERS


@dataclass(frozen=True)
class DecLConfig(TrainConfig):
    """``order``: ``mix_then_train`` is paper A's Algorithm 2 (line 10 mixes, then the client trains;
    the final model averages the trained models); ``train_then_mix`` is its released code."""

    order: str = "mix_then_train"

    def validate(self) -> None:
        super().validate()
        if self.order not in DECL_ORDERS:
            raise ValueError(f"order must be one of {', '.join(DECL_ORDERS)}, got {self.order!r}")


@dataclass
class RunResult:
    """The outcome of a run. ``final_state`` is the model to evaluate (FL: the global model
    ``final_index``, which ``Strategy.final_global_index`` chooses, 0 unless a strategy keeps several;
    DecL: the average of all clients, index 0); ``metrics`` holds one record per round (see
    ``Simulator.run``)."""

    final_state: StateDict
    global_states: list[StateDict]
    metrics: list[dict]
    schedule: list[list[int]]
    resumed_rounds: int
    fingerprint: str
    final_index: int = 0


# The keys of a round's record (``Simulator.run``) that measure time, and what the round's checkpoint wrote
# (whether a round is checkpointed depends on the clock): they differ from run to run, whereas everything
# else in the record is a function of the run's inputs, as its weights are.
ROUND_TIMINGS = ("train_time_s", "wall_time_s", "images_per_s", "checkpoint_s", "checkpoint_bytes")


def round_outcomes(metrics: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The per-round records without their timings: the same for every run of the same inputs."""
    return [{key: value for key, value in record.items() if key not in ROUND_TIMINGS} for record in metrics]


def round_timings(metrics: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Each timing of the per-round records, round after round (0 where a record lacks it)."""
    return {key: [float(record.get(key, 0.0)) for record in metrics] for key in ROUND_TIMINGS}


def make_schedule(num_clients: int, per_round: int, rounds: int, seed: int) -> list[list[int]]:
    """Clients of each round, uniformly without replacement within a round (sorted for reading)."""
    if not 1 <= per_round <= num_clients:
        raise ValueError(f"clients_per_round must be in 1..{num_clients}, got {per_round}")
    rng = np.random.default_rng(derive_seed(seed, Stream.SCHEDULE))
    return [sorted(int(c) for c in rng.choice(num_clients, per_round, replace=False)) for _ in range(rounds)]


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
        if self.kind not in strategy.frameworks:
            raise ValueError(f"strategy {strategy.name!r} runs in {', '.join(strategy.frameworks)}, not {self.kind}")
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


class FLSimulator(Simulator):
    """Federated learning with a server (paper A, Algorithm 1; McMahan et al.'s FedAvg loop).

    ``FLSimulator(method, clients, strategy, FLConfig(...), checkpoint_dir=..., run_config=...).run()``
    """

    kind = "fl"
    config: FLConfig

    def __init__(self, method: nn.Module, clients: Sequence[ClientData], strategy: Strategy,
                 config: FLConfig, **kwargs: Any):
        if not isinstance(config, FLConfig):
            raise TypeError(f"FLSimulator needs an FLConfig, got {type(config).__name__}")
        super().__init__(method, clients, strategy, config, **kwargs)
        # Global models hold only the shared keys: per-client memory never enters them.
        self.global_states = strategy.initial_global_states(snapshot(method, strategy.shared_keys))

    def _make_schedule(self) -> list[list[int]]:
        config = self.config
        return make_schedule(len(self.clients), config.clients_per_round, config.rounds, config.seed)

    def _run_round(self, round_index: int) -> tuple[list[LocalResult], dict]:
        tasks = [ClientTask(client_id, round_index, sum(client_id in chosen for chosen in self.schedule[:round_index]))
                 for client_id in self.schedule[round_index]]
        uploads, results = map(list, zip(*self._train_clients(tasks, self.global_states)))
        self.strategy.receive_uploads(uploads, round_index)
        self.global_states = self.strategy.server_step(self._aggregate(uploads), uploads, round_index)
        return results, {}

    def _aggregate(self, uploads: list[Upload]) -> list[StateDict]:
        """Aggregate each global model over the uploads that started from it (FedAvg by default)."""
        merged = list(self.global_states)
        for index in sorted({u.model_index for u in uploads}):
            group = [u for u in uploads if u.model_index == index]
            weights = self.strategy.aggregation_weights([u.num_samples for u in group])
            previous = self.global_states[index]
            merged[index] = {**previous, **self.strategy.aggregate(group, weights, previous)}
        return merged

    def _model_payload(self) -> dict:
        return {"global_states": self.global_states}

    def _restore_models(self, payload: Mapping[str, Any]) -> None:
        self.global_states = payload["global_states"]

    def _result_states(self) -> tuple[StateDict, list[StateDict], int]:
        """The strategy's final global model (model 0 unless it keeps several), completed with the
        initial local tensors so that it loads into the method (as DecL's final model);
        ``global_states`` are the shared tensors only."""
        index = self.strategy.final_global_index(self.global_states)
        if not 0 <= index < len(self.global_states):
            raise IndexError(f"strategy {self.strategy.name!r} chose global model {index} of "
                             f"{len(self.global_states)}")
        return {**self.strategy.initial_local, **self.global_states[index]}, self.global_states, index


class DecLSimulator(Simulator):
    """Decentralized learning on a fixed graph (paper A, Algorithm 2).

    ``DecLSimulator(method, clients, strategy, mixing, DecLConfig(...), checkpoint_dir=...).run()``;
    ``mixing`` is the N x N row-stochastic matrix of ``dssl.topology.mixing.mixing_matrix``, or with
    ``push_sum=True`` a column-stochastic one run with push-sum weights. Each round's record adds
    ``consensus_distance``: mean_i ||x_i - x_bar||^2 right after mixing (push-sum: of x_i / w_i).
    """

    kind = "decl"
    config: DecLConfig

    def __init__(self, method: nn.Module, clients: Sequence[ClientData], strategy: Strategy,
                 mixing: np.ndarray, config: DecLConfig, *, push_sum: bool = False, **kwargs: Any):
        if not isinstance(config, DecLConfig):
            raise TypeError(f"DecLSimulator needs a DecLConfig, got {type(config).__name__}")
        self.push_sum = bool(push_sum)
        self.mixing_np = _check_mixing(mixing, len(clients), column=self.push_sum)
        super().__init__(method, clients, strategy, config, **kwargs)
        self.mixing = torch.as_tensor(self.mixing_np, device=self.device)
        self.local_template = {k: self.initial_state[k] for k in strategy.local_keys}
        self.states = StackedStates({k: self.initial_state[k] for k in strategy.shared_keys}, len(clients))
        self.push_weights = torch.ones(len(clients), dtype=torch.float64, device=self.device)

    def _fingerprint_items(self, run_config: Mapping[str, Any]) -> dict:
        items = super()._fingerprint_items(run_config)
        items["mixing"] = hashlib.sha256(self.mixing_np.tobytes()).hexdigest()
        if self.push_sum:
            items["push_sum"] = True
        return items

    def _make_schedule(self) -> list[list[int]]:
        return [list(range(len(self.clients)))] * self.config.rounds

    def _run_round(self, round_index: int) -> tuple[list[LocalResult], dict]:
        mix_first = self.config.order == "mix_then_train"
        extras = {"consensus_distance": self._gossip([], round_index)} if mix_first else {}
        tasks = [ClientTask(client_id, round_index, round_index,
                            [{**self.local_template, **self._model_row(client_id)}])
                 for client_id in range(len(self.clients))]
        uploads, results = map(list, zip(*self._train_clients(tasks, receive=self._store_upload)))
        self.strategy.receive_uploads(uploads, round_index)
        if not mix_first:
            extras["consensus_distance"] = self._gossip(uploads, round_index)
        return results, extras

    def _store_upload(self, task: ClientTask, upload: Upload) -> None:
        """Write a trained model into its row as soon as it arrives (its clone is dropped: the row holds it)."""
        (start,) = task.global_states
        self._write_trained(task.client_id, start, upload.state)
        upload.state = self.states.row(task.client_id)

    def _gossip(self, uploads: list[Upload], round_index: int) -> float:
        self.strategy.gossip(self.states, self.mixing, uploads, round_index)
        if self.push_sum:
            self.push_weights = self.mixing.to(torch.float64) @ self.push_weights
        return self._consensus_distance()

    def _model_row(self, client_id: int) -> StateDict:
        """The model client ``client_id`` holds: its row (views), de-biased by w_i under push-sum."""
        row = self.states.row(client_id)
        if not self.push_sum:
            return row
        weight = self.push_weights[client_id]
        return {k: (v / weight.to(v.dtype)) if v.is_floating_point() else (v / weight).round().to(v.dtype)
                for k, v in row.items()}

    def _write_trained(self, client_id: int, start: StateDict, trained: Mapping[str, torch.Tensor]) -> None:
        """Store a trained model; under push-sum add the update to x_i (SGP's x_i - lr * g(x_i / w_i))."""
        if self.push_sum:
            row, weight = self.states.row(client_id), self.push_weights[client_id]
            trained = {k: row[k] + (trained[k] - start[k]) if row[k].is_floating_point()
                       else trained[k].double() * weight for k in row}
        self.states.write_row(client_id, trained)

    def _consensus_distance(self) -> float:
        if not self.push_sum:
            return self.states.consensus_distance()
        models = self.states.floats / self.push_weights.to(self.states.floats.dtype)[:, None]
        return float((models - models.mean(dim=0, keepdim=True)).pow(2).sum(dim=1).mean())

    def client_state(self, client_id: int) -> StateDict:
        """Client ``client_id``'s current model (views into the stacked states for float tensors)."""
        kept = to_device(self.local_states[client_id].get(LOCAL_MODEL, {}), self.device)
        return {**self.local_template, **self._model_row(client_id), **kept}

    def _model_payload(self) -> dict:
        return {"client_states": self.states.tensors(), "push_weights": self.push_weights}

    def _restore_models(self, payload: Mapping[str, Any]) -> None:
        self.states.load_tensors(payload["client_states"])
        self.push_weights = payload["push_weights"].to(self.device)

    def _result_states(self) -> tuple[StateDict, list[StateDict], int]:
        """The weighted average of the clients; under push-sum sum_j a_j x_j / sum_j a_j w_j."""
        weights = self.strategy.aggregation_weights([c.num_samples for c in self.clients])
        shared = self.states.average(weights)
        if self.push_sum:
            mass = float(torch.as_tensor(weights, dtype=torch.float64, device=self.device) @ self.push_weights)
            shared = {k: v / mass if v.is_floating_point() else (v / mass).round().to(v.dtype)
                      for k, v in shared.items()}
        return {**self.local_template, **shared}, [shared], 0


def _check_mixing(mixing: np.ndarray, num_clients: int, column: bool = False) -> np.ndarray:
    matrix = np.asarray(mixing, dtype=np.float64)
    if matrix.shape != (num_clients, num_clients):
        raise ValueError(f"mixing matrix must be {num_clients} x {num_clients}, got {matrix.shape}")
    if not np.isfinite(matrix).all() or (matrix < 0).any():
        raise ValueError("mixing matrix must be finite and non-negative")
    axis, kind = (0, "column") if column else (1, "row")
    if not np.allclose(matrix.sum(axis=axis), 1.0, atol=1e-9):
        raise ValueError(f"mixing matrix must be {kind}-stochastic, {kind} sums {matrix.sum(axis=axis).tolist()}")
    return np.ascontiguousarray(matrix)

"""Stages ``pretrain_fl@<model>-<partition>-<strategy>``, ``pretrain_decl@<model>-<graph>-<strategy>``,
``pretrain_central@<model>`` and ``pretrain_local@<model>-<partition>`` (clients trained alone):
self-supervised pretraining of one model under one framework (and one named entry of params.yaml's
``strategies``), every seed of ``seeds`` (each its own folder ``seed-<s>/`` and MLflow run; stand-alone
clients one folder ``seed-<s>/client-<c>/`` each).

Seed s fixes the initial weights (the same for every framework and partition, so conditions pair by
seed) and every random stream of the run. Seeds train side by side on the cores (``workers``).
A training section (``pretrain.<framework>.train``, or a strategy entry's ``train``) may set the step
options (``dssl.training.options``: ``device``, ``precision``, ``channels_last``, ``compile``); the
device is resolved before anything is loaded, and a ``cuda`` request without a GPU stops the stage.
A SIGTERM or SIGUSR1 stops the stage after the round (central, stand-alone: the epoch) under way, its
checkpoint written (``training.preemption``).
Checkpoints go to ``checkpoints/<stage>/seed-<s>/`` (outside the stage's DVC outputs, which DVC deletes
before a run), written after a round (central and stand-alone training: an epoch) as often as params.yaml's
``checkpoint`` section asks (``training.preemption.checkpoint_interval``; no stage input: changing it
re-runs nothing), so a killed stage resumes each seed from its last checkpoint; the final weights equal
those of an uninterrupted run. The outputs are written only when every seed has completed; then
the stage's checkpoints are removed (as an evaluation stage removes its own).
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Mapping

from dssl.config.grids import cell_seeds
from dssl.config.study import StrategyEntry, Study, thawed
from dssl.pipeline.common import Stage, StageError, atomic_dir
from dssl.pipeline.layout import (CHECKPOINTS, SINGLE_CLIENT_STRATEGY, cell_path, client_dir, graph_file, model_dir,
                                  partition_dir, prepared_dir, seed_dir)
from dssl.pipeline.workers import client_state_storage, client_worker_count, run_tasks, stage_device
from dssl.tracking import StageRecord
from dssl.tracking.lineage import hardware
from dssl.training.preemption import CheckpointInterval, checkpoint_interval


def build_method(params: dict, model: str, seed: int, device: str = "cpu"):
    """The model's SSL method (hyper-parameters: ``method_hparams``), initialised from the run's seed
    (same seed -> same initial weights), and the prepared training split it trains on."""
    import torch

    from dssl.methods import create_method

    spec = Study.from_params(params).models[model]
    train = load_pretrain_set(params)
    torch.manual_seed(seed)
    method = create_method(spec.method, spec.backbone, params["pretrain"]["image_size"], train.image_shape[0],
                           **method_hparams(params, model))
    return method.to(device), train


def method_hparams(params: dict, model: str) -> dict:
    """A model's method hyper-parameters: the pretraining dataset's view defaults
    (``DatasetEntry.view_hparams``: no horizontal flips for digits), overridden by the model's own ``hparams``."""
    from dssl.data.datasets import DATASETS

    study = Study.from_params(params)
    return {**DATASETS[study.dataset].view_hparams, **thawed(study.models[model].hparams)}


def load_pretrain_set(params: dict):
    from dssl.data.datasets import load_split
    from dssl.data.imageset import resized

    pretrain = params["pretrain"]
    return resized(load_split(prepared_dir(pretrain["dataset"]), "train"), pretrain["image_size"])


def optimizer_config(params: dict, model: str, strategy: str | None = None) -> dict:
    """The optimizer recipe of a model's backbone family (``pretrain.optimizers``), or the one the strategy
    entry's ``train.optimizer`` gives its cells (a baseline trained with its authors' recipe): ``Study.optimizer``."""
    return thawed(Study.from_params(params).optimizer(model, strategy))


@dataclass(frozen=True)
class Cell:
    """One pretraining cell: what every seed of the stage shares."""

    stage: str          # the stage name (checkpoints live under it)
    framework: str
    model: str
    place: str | None   # the partition (FL) or graph (DecL); None for central
    read: dict          # exactly the params the stage reads
    inputs: tuple[Path, ...] = field(default=())
    strategy: str | None = None   # the name of a 'strategies' entry (FL, DecL)
    device: str = "cpu"           # resolved from the training section's ``device``

    @property
    def cell(self) -> str:
        return cell_path(self.model, self.place, self.strategy)


# What training one seed (or stand-alone client) returns to the stage: its summary metrics, and its
# per-round timings (MLflow metrics at steps 1, 2, ...).
SeedMetrics = tuple[dict[str, float], dict[str, list[float]]]


def summary_metrics(result) -> dict[str, float]:
    rounds = result.metrics
    # Orchestra's round 0 only initialises its centroids: no step, no loss (NaN); the first loss is the
    # first round that trained.
    trained = [float(r["loss"]) for r in rounds if math.isfinite(float(r["loss"]))] or [math.nan]
    return {
        "final_loss": float(rounds[-1]["loss"]),
        "first_loss": trained[0],
        "train_seconds": float(sum(r["train_time_s"] for r in rounds)),
        "images_per_s": float(sum(r["images"] for r in rounds) / max(sum(r["train_time_s"] for r in rounds), 1e-9)),
        "resumed_rounds": float(result.resumed_rounds),
    }


def _save_seed(folder: Path, cell: Cell, seed: int, method, result, extra: dict) -> SeedMetrics:
    """Save one seed's weights (whole method and encoder alone) and history; return its metrics and its
    per-round timings.

    history.json, like the weights, is a function of the stage's inputs: it holds no timing and no count
    of resumed rounds, which differ from run to run (an identical rerun would otherwise change the
    output's hash and put every evaluation reading it out of date). Those go to the seed's MLflow run:
    ``summary_metrics``, and the per-round timings as metrics at steps 1, 2, ... (``ROUND_TIMINGS``)."""
    import torch

    from dssl.federation.run_result import round_outcomes, round_timings

    method.load_state_dict(result.final_state)
    method.cpu()  # weights are saved device-free
    folder.mkdir(parents=True)
    torch.save(method.state_dict(), folder / "model.pt")
    torch.save(method.encoder.state_dict(), folder / "encoder.pt")
    # final_model_index: which global model was saved (FL: the strategy's choice, FeatARC's cluster; else 0)
    parameters = {"method": sum(p.numel() for p in method.parameters()),
                  "encoder": sum(p.numel() for p in method.encoder.parameters())}
    history = {"stage": cell.stage, "seed": seed, "params": cell.read, **extra, "parameters": parameters,
               "hardware": hardware(), "device": cell.device,
               "schedule": result.schedule, "rounds": round_outcomes(result.metrics),
               "final_model_index": result.final_index}
    (folder / "history.json").write_text(json.dumps(history, indent=1, sort_keys=True, default=float) + "\n")
    return summary_metrics(result), {f"round.{key}": values for key, values in round_timings(result.metrics).items()}


@dataclass(frozen=True)
class Task:
    """One training run of a stage: a seed, and for stand-alone training one client of it."""

    seed: int
    client: int | None = None

    @property
    def folder(self) -> str:
        """Its folder inside the cell's output (and its MLflow run name)."""
        return seed_dir(self.seed) if self.client is None else f"{seed_dir(self.seed)}/{client_dir(self.client)}"


def _train_seed(run_seed, cell: Cell, params: dict, out: Path, task: Task) -> SeedMetrics:
    """Train one seed of ``cell`` into ``out/seed-<s>`` (runs in a worker process)."""
    method, result, extra = run_seed(cell, params, task.seed)
    return _save_seed(out / task.folder, cell, task.seed, method, result, extra)


def _run_cell(stage: Stage, cell: Cell, train, tasks: list[Task] | None = None) -> Path:
    """Every task of the cell (default: one per seed) into one atomically written folder, then one
    MLflow run per task. ``train(cell, params, out, task)`` trains one task into ``out`` and returns
    its metrics and per-round timings; ``run_seed(cell, params, seed)`` functions are wrapped by
    ``_train_seed``."""
    out = model_dir(cell.framework, cell.cell)
    if tasks is None:
        tasks, train = [Task(seed) for seed in stage.seeds], partial(_train_seed, train)
    with atomic_dir(out) as tmp:
        results = run_tasks(partial(train, cell, stage.params, tmp), tasks, _torch_device(cell.device))
    # The outputs hold every seed now: the checkpoints (a DecL cell's are every client's state, ~0.5-1 GB
    # per seed at paper scale) only aided resumption, and a rerun that changes anything restarts anyway.
    shutil.rmtree(CHECKPOINTS / cell.stage, ignore_errors=True)
    records = [
        StageRecord(stage.stage_name, cell.read, {**metrics, "worker_peak_rss_mb": rss},
                    artifacts=[out / task.folder / "history.json"],
                    inputs=[prepared_dir(stage.params["pretrain"]["dataset"]), *cell.inputs],
                    run=task.folder, seed=task.seed, steps=timings)
        for task, ((metrics, timings), rss) in zip(tasks, results)
    ]
    stage.log_runs(records)
    return out


def build_strategy(entry: StrategyEntry | Mapping[str, Any]):
    """The strategy of a ``strategies`` entry (its registry name + its own options: ``StrategyEntry``), and
    the DecL round's keys of the entry (``mixing``, ``order``) apart. ``entry`` may be the entry's params
    mapping as it stands in ``strategies``."""
    from dssl.federation import create_strategy

    if not isinstance(entry, StrategyEntry):
        entry = StrategyEntry.from_spec(str(entry["name"]), entry)
    return create_strategy(entry.registry, **thawed(entry.options)), dict(entry.round_options)


def train_schedule(params: dict, framework: str, strategy: str | None = None) -> dict:
    """The framework's training schedule (``pretrain.<framework>.train``) with the strategy entry's own
    ``train`` overrides: a grid that needs another schedule (paper A's Table 2 trains 200 rounds of 10
    local epochs) names an entry that says so, and the entry, part of the stage name, carries it:
    ``Study.schedule``, as a plain dict."""
    return thawed(Study.from_params(params).schedule(framework, strategy))


def schedule_device(params: dict, framework: str, strategy: str | None = None) -> str:
    """The device of a training section (resolved now: a missing GPU stops the stage here)."""
    study = Study.from_params(params)
    where = study.schedule_key(framework, "device", strategy)
    return str(stage_device({where: study.schedule(framework, strategy).get("device", "auto")}))


def simulator_config(schedule: dict) -> dict:
    """A training section as the simulator's config takes it: everything but the device."""
    return {key: value for key, value in schedule.items() if key != "device"}


def _torch_device(name: str):
    import torch

    return torch.device(name)


def stop_when_asked(record: dict) -> None:
    """Called after each round's checkpoint: leave if a SIGTERM / SIGUSR1 asked to (``preemption``)."""
    from dssl.training.preemption import stop_if_requested

    stop_if_requested(f"after round {record['round']}")


def strategy_record(strategy) -> dict:
    """Which strategy ran, with every option resolved (defaults included), for history.json."""
    return {"strategy": {"name": strategy.name, "hparams": dict(strategy.hparams)}}


def _fl_seed(cell: Cell, params: dict, seed: int):
    from dssl.data.partition import load_partition
    from dssl.federation import FLConfig, FLSimulator, clients_from_partition

    method, train_set = build_method(params, cell.model, seed, cell.device)
    clients = clients_from_partition(train_set, load_partition(partition_dir(cell.place)))
    interval = checkpoint_interval(params)
    config = FLConfig.from_dict({**simulator_config(train_schedule(params, "fl", cell.strategy)), "seed": seed,
                                 "optimizer": optimizer_config(params, cell.model, cell.strategy),
                                 "checkpoint_every": interval.every_rounds})
    strategy, _ = build_strategy(StrategyEntry.from_params(params, cell.strategy))
    simulator = FLSimulator(method, clients, strategy, config, checkpoint_dir=CHECKPOINTS / cell.stage / seed_dir(seed),
                            run_config={**cell.read, "seed": seed}, on_mismatch="restart",
                            client_workers=client_worker_count(), client_states=client_state_storage(),
                            checkpoint_interval_s=interval.every_seconds)
    return method, simulator.run(stop_when_asked), strategy_record(strategy)


def run_fl(model: str, partition: str, strategy: str, params_path: Path | str) -> Path:
    stage = Stage("pretrain_fl", f"{model}-{partition}-{strategy}", params_path,
                  lambda params: cell_seeds(params, "fl", (model, partition, strategy)))
    params = stage.params
    read = _params_read(params, model, {"fl": {"train": params["pretrain"]["fl"]["train"]}}, stage.seeds,
                        partitions={partition: params["partitions"][partition]},
                        strategies={strategy: params["strategies"][strategy]})
    cell = Cell(stage.stage_name, "fl", model, partition, read, (partition_dir(partition),), strategy,
                schedule_device(params, "fl", strategy))
    return _run_cell(stage, cell, _fl_seed)


def _decl_seed(cell: Cell, params: dict, seed: int):
    import numpy as np

    from dssl.config.lookups import graph_partition
    from dssl.data.partition import load_partition
    from dssl.federation import DecLConfig, DecLSimulator, clients_from_partition
    from dssl.topology.graphs import load_graph
    from dssl.config.mixing import MIXING_SPECS
    from dssl.topology.mixing import DEFAULT_RULE, mixing_matrix

    method, train_set = build_method(params, cell.model, seed, cell.device)
    partition = load_partition(partition_dir(graph_partition(params, cell.place)))
    clients = clients_from_partition(train_set, partition)
    adjacency = load_graph(graph_file(cell.place))[0].adjacency
    sizes = np.array([len(i) for i in partition.client_indices])
    strategy, round_options = build_strategy(StrategyEntry.from_params(params, cell.strategy))
    rule = round_options.pop("mixing", DEFAULT_RULE)
    mixing = mixing_matrix(adjacency, rule, sizes)
    interval = checkpoint_interval(params)
    config = DecLConfig.from_dict({**simulator_config(train_schedule(params, "decl", cell.strategy)), **round_options,
                                   "seed": seed, "optimizer": optimizer_config(params, cell.model, cell.strategy),
                                   "checkpoint_every": interval.every_rounds})
    simulator = DecLSimulator(method, clients, strategy, mixing, config, push_sum=MIXING_SPECS[rule].column_stochastic,
                              checkpoint_dir=CHECKPOINTS / cell.stage / seed_dir(seed),
                              run_config={**cell.read, "seed": seed}, on_mismatch="restart",
                              client_workers=client_worker_count(), client_states=client_state_storage(),
                              checkpoint_interval_s=interval.every_seconds)
    extra = {"mixing": mixing.tolist(), "mixing_rule": rule, "order": config.order, **strategy_record(strategy)}
    return method, simulator.run(stop_when_asked), extra


def run_decl(model: str, graph: str, strategy: str, params_path: Path | str) -> Path:
    from dssl.config.lookups import graph_partition

    stage = Stage("pretrain_decl", f"{model}-{graph}-{strategy}", params_path,
                  lambda params: cell_seeds(params, "decl", (model, graph, strategy)))
    params = stage.params
    partition = graph_partition(params, graph)
    read = _params_read(params, model, {"decl": {"train": params["pretrain"]["decl"]["train"]}}, stage.seeds,
                        graphs={graph: graph_spec(params, graph)},
                        strategies={strategy: params["strategies"][strategy]})
    cell = Cell(stage.stage_name, "decl", model, graph, read, (partition_dir(partition), graph_file(graph)), strategy,
                schedule_device(params, "decl", strategy))
    return _run_cell(stage, cell, _decl_seed)


def train_alone(method, data, schedule: dict, seed: int, optimizer: dict, checkpoint_dir: Path, run_config: dict,
                interval: CheckpointInterval = CheckpointInterval()):
    """``data`` (one client's, or the pooled set) trained for ``schedule['epochs']`` epochs in one continuous
    run: one optimizer for the whole run, as in centralised training. It is a one-client FL run of one
    round, so it shares the simulator's training loop, checkpoints and bit-identical resumption. Its
    epochs are its rounds as far as ``interval`` goes: a checkpoint inside the round after every
    ``every_rounds``-th epoch once ``every_seconds`` have passed (model, optimizer, generators and loss
    sums: the run resumed from it ends with the same bits), and a stop request ends it after the epoch
    under way, its checkpoint written."""
    from dssl.federation import FLConfig, FLSimulator, create_strategy

    steps = {key: value for key, value in simulator_config(schedule).items() if key not in ("epochs", "batch_size")}
    config = FLConfig.from_dict({"rounds": 1, "local_epochs": schedule["epochs"], "clients_per_round": 1,
                                 "batch_size": schedule["batch_size"], "seed": seed, "optimizer": optimizer, **steps})
    simulator = FLSimulator(method, [data], create_strategy(SINGLE_CLIENT_STRATEGY), config,
                            checkpoint_dir=checkpoint_dir, run_config=run_config, on_mismatch="restart",
                            checkpoint_epochs=interval.every_rounds, checkpoint_interval_s=interval.every_seconds)
    return simulator.run()


def _central_seed(cell: Cell, params: dict, seed: int):
    """The centralised reference: one 'client' holding the pooled data."""
    import numpy as np

    from dssl.federation import ClientData

    method, train_set = build_method(params, cell.model, seed, cell.device)
    pooled = ClientData(train_set, np.arange(len(train_set), dtype=np.int64))
    result = train_alone(method, pooled, train_schedule(params, "central"), seed,
                         optimizer_config(params, cell.model), CHECKPOINTS / cell.stage / seed_dir(seed),
                         {**cell.read, "seed": seed}, checkpoint_interval(params))
    return method, result, {}


def run_central(model: str, params_path: Path | str) -> Path:
    stage = Stage("pretrain_central", model, params_path)
    read = _params_read(stage.params, model, {"central": {"train": stage.params["pretrain"]["central"]["train"]}},
                        stage.seeds)
    return _run_cell(stage, Cell(stage.stage_name, "central", model, None, read,
                                 device=schedule_device(stage.params, "central")), _central_seed)


def stand_alone_clients(params: dict, partition: str) -> list[int]:
    """The clients ``pretrain_local`` trains on ``partition``, checked against the partition itself."""
    from dssl.config.grids import local_clients
    from dssl.data.partition import load_partition

    count = len(load_partition(partition_dir(partition)).client_indices)
    clients = local_clients(params, partition, count)
    outside = [c for c in clients if not 0 <= c < count]
    if outside:
        raise StageError(f"pretrain.local.clients.{partition} names clients {outside}, but partition {partition!r} "
                         f"has {count} (numbered 0..{count - 1}); fix it in params.yaml")
    return clients


def _local_client(cell: Cell, params: dict, out: Path, task: Task) -> SeedMetrics:
    """Client c of the cell's partition trained alone on its own data from seed s's initial weights
    (the same weights every FL cell of the model starts from), into ``out/seed-<s>/client-<c>``."""
    from dssl.data.partition import load_partition
    from dssl.federation import clients_from_partition

    method, train_set = build_method(params, cell.model, task.seed, cell.device)
    data = clients_from_partition(train_set, load_partition(partition_dir(cell.place)))[task.client]
    result = train_alone(method, data, train_schedule(params, "local"), task.seed,
                         optimizer_config(params, cell.model), CHECKPOINTS / cell.stage / task.folder,
                         {**cell.read, "seed": task.seed, "client": task.client}, checkpoint_interval(params))
    return _save_seed(out / task.folder, cell, task.seed, method, result, {"client": task.client})


def run_local(model: str, partition: str, params_path: Path | str) -> Path:
    """Stand-alone training (paper B's stand-alone row; paper A's Table 5 local models): every client of
    ``stand_alone_clients`` trains alone, every seed; one MLflow run per (seed, client)."""
    stage = Stage("pretrain_local", f"{model}-{partition}", params_path,
                  lambda params: cell_seeds(params, "local", (model, partition)))
    params = stage.params
    clients = stand_alone_clients(params, partition)
    local = params["pretrain"]["local"]
    read = _params_read(params, model, {"local": {key: local[key] for key in ("train", "clients") if key in local}},
                        stage.seeds)
    cell = Cell(stage.stage_name, "local", model, partition, read, (partition_dir(partition),),
                device=schedule_device(params, "local"))
    return _run_cell(stage, cell, _local_client, [Task(seed, client) for seed in stage.seeds for client in clients])


def graph_spec(params: dict, graph: str) -> dict:
    """A graph's params entry, from 'graphs' or 'improved_graphs'."""
    return (params.get("graphs") or {}).get(graph) or params["improved_graphs"][graph]


def _params_read(params: dict, model: str, framework: dict, seeds: list[int], **extra: dict) -> dict:
    """Exactly the params a pretraining stage reads (what DVC tracks for it and MLflow logs)."""
    pretrain = params["pretrain"]
    family = Study.from_params(params).models[model].family
    read = {
        "models": {model: params["models"][model]},
        "pretrain": {"dataset": pretrain["dataset"], "image_size": pretrain["image_size"],
                     "optimizers": {family: pretrain["optimizers"][family]}, **framework},
    }
    read.update(extra)
    read["seeds"] = seeds   # the cell's own (a grid may set them)
    return read

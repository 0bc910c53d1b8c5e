"""Stages ``evaluate_<framework>@<cell>``: score every seed of one pretrained cell (or of a randomly
initialised backbone) on the (downstream dataset, protocol) pairs the tables reading it need
(``config.evaluation_plan``: the grids listing the cell, ``evaluate.grids``; the same function gives the
catalogue its inputs and ``dssl plan`` its counts). Each result records the images the task trained the
encoder on (``images_trained``), which the plan predicts.

Hyper-parameters are chosen on a validation split carved from the training split; the test split is
scored once. Each (seed, dataset, protocol) is one task, run side by side on the cores, and one result
file ``reports/metrics/<framework>/<cell>/seed-<s>/<dataset>-<protocol>.json`` with its own MLflow run,
named after the result (``<stage>/seed-<s>/<dataset>-<protocol>``: ``tracking.names.result_run_name``)
and tagged with the file's md5; the file holds no run id.
The evaluation of seed s uses seed s for its split and head, and the random-init reference of seed s
is the very network pretraining seed s started from, so "pretrained minus random init" pairs by seed.
A stand-alone cell (``evaluate_local``) holds one encoder per client and seed; each is evaluated on its
own and the seed's result is their mean (each client's accuracy kept in the file).

With ``evaluate.reestimate_batchnorm: true`` a pretrained encoder's BatchNorm running statistics are
re-estimated on the unaugmented training images of the downstream dataset before it is evaluated
(``evaluation.batchnorm``; pretraining collected them on masked or augmented views); neither paper A nor
its code does it, so the default is false, and each result says which ran (``batchnorm_reestimated``).
The random-init reference is evaluated exactly as it was created.

A protocol's config for a task is ``evaluate.<protocol>`` with its ``per_family`` and ``per_dataset``
overrides resolved (``dssl.config.protocols``); the stage runs on the device the configs ask for
(``device``: one device per stage, a missing GPU stops it before anything is loaded) in torch's
deterministic mode, as pretraining does. Each task checkpoints into
``checkpoints/<stage>/seed-<s>/<dataset>-<protocol>[/client-<c>]/`` (``evaluation.progress``) and, once
done, keeps its result there (``result.json``): a killed or preempted stage (SIGTERM / SIGUSR1,
``training.preemption``) resumes every task where it stopped, with the same bits, and a stage whose
tracking store was unreachable, run again, trains nothing and only logs what is still unlogged. The
result files are written before the runs are logged, and never after (``tracking.outbox``: a run is
logged at most once, and ``dssl tracking sync`` touches no output).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from dssl.artifacts import ArtifactError
from dssl.config.evaluation_plan import cell_grids, protocol_config, stage_pairs
from dssl.config.grids import cell_seeds, reference_seeds
from dssl.config.lookups import backbone_family
from dssl.config.study import ModelSpec
from dssl.pipeline.common import Stage, atomic_dir
from dssl.pipeline.layout import (
    CHECKPOINTS,
    cell_path,
    client_dir,
    graph_file,
    metrics_dir,
    model_dir,
    prepared_dir,
    seed_dir,
)
from dssl.pipeline.workers import run_tasks, stage_device
from dssl.tracking import StageRecord
from dssl.tracking.lineage import file_md5, hardware_label
from dssl.tracking.names import evaluation_run, output_tag
from dssl.tracking.outbox import write_json


@dataclass(frozen=True)
class Subject:
    """What is evaluated: a pretrained cell's encoders (one per seed, or per seed and stand-alone client)
    or a random-init backbone."""

    framework: str
    cell: str                  # folder under models/<framework>/ and reports/metrics/<framework>/
    backbone: str
    describe: dict[str, Any]   # the columns the report groups by
    pretrained: bool = True
    clients: tuple[int, ...] = ()   # stand-alone cells: one encoder per client, scored as their mean
    key: tuple[str, ...] = ()       # the cell as params names it (random init: its backbone)

    def weights(self, seed: int, client: int | None = None) -> Path | None:
        if not self.pretrained:
            return None
        folder = model_dir(self.framework, self.cell) / seed_dir(seed)
        return (folder / client_dir(client) if client is not None else folder) / "encoder.pt"

    def seed_inputs(self, seed: int) -> list[Path]:
        """The weights one seed's result reads (lineage)."""
        if not self.pretrained:
            return []
        return [self.weights(seed, c) for c in self.clients] if self.clients else [self.weights(seed)]

    def pretraining_facts(self, weights: Path | None, encoder) -> dict[str, int | None]:
        """Parameters of the evaluated encoder and of the whole pretrained method (heads, predictor, target
        networks: what paper A's Table 2 counts), and for an FL or DecL cell the rounds it trained (a
        learning curve reads one strategy stopped after different rounds); the latter two from the
        pretraining's history.json."""
        from dssl.artifacts import read_json

        history = weights.parent / "history.json" if weights is not None else None
        recorded = read_json(history, ()) if history is not None and history.is_file() else {}
        rounds = len(recorded["rounds"]) if self.framework in ("fl", "decl") and "rounds" in recorded else None
        return {"encoder_parameters": sum(p.numel() for p in encoder.parameters()),
                "method_parameters": (recorded.get("parameters") or {}).get("method"), "rounds": rounds}


@lru_cache(maxsize=4)
def _downstream(dataset: str, size: int):
    from dssl.data.datasets import load_split
    from dssl.data.imageset import resized

    folder = prepared_dir(dataset)
    return resized(load_split(folder, "train"), size), resized(load_split(folder, "test"), size)


def _encoder(backbone: str, image_size: int, in_chans: int, weights: Path | None, seed: int, device: str,
             vit_pool: str | None = None):
    """Seed s's encoder: its pretrained weights, or the backbone pretraining seed s started from.

    ``vit_pool`` (``evaluate.vit_pool``): which features a ViT hands to the protocols, the class token or
    the mean of its patch tokens; the same for pretrained and random-init encoders."""
    import torch

    from dssl.artifacts import ArtifactError, load_torch
    from dssl.models import create_backbone

    torch.manual_seed(seed)  # as build_method: the backbone is the first module a method creates
    encoder = create_backbone(backbone, image_size, in_chans)
    if weights is not None:
        try:
            encoder.load_state_dict(load_torch(weights))
        except RuntimeError as err:
            raise ArtifactError(weights, f"does not fit backbone {backbone!r} ({str(err).splitlines()[0]})") from err
    if vit_pool is not None and hasattr(encoder, "set_pool"):
        encoder.set_pool(vit_pool)
    return encoder.to(device)


Task = tuple[int, str, str, "int | None"]   # (seed, dataset, protocol, stand-alone client or None)
RESULT_FILE = "result.json"


def task_folder(stage_name: str, task: Task) -> Path:
    """Where a task checkpoints and keeps its result until the stage has written its outputs."""
    seed, dataset, protocol, client = task
    folder = CHECKPOINTS / stage_name / seed_dir(seed) / f"{dataset}-{protocol}"
    return folder / client_dir(client) if client is not None else folder


def reestimates_batchnorm(params: dict) -> bool:
    """``evaluate.reestimate_batchnorm``: whether a pretrained encoder's BatchNorm statistics are re-estimated
    on the downstream training images before a protocol runs. Neither paper A nor its code does (default
    false); the embedded profile does, since pretraining collected them on masked or augmented views."""
    return bool(params["evaluate"].get("reestimate_batchnorm", False))


def _fingerprint(subject: Subject, params: dict, task: Task, config) -> str:
    """What a task's checkpoint and result stand for: its config, seed, image size and input md5s."""
    import hashlib

    from dssl.tracking import project_root
    from dssl.tracking.inputs import input_md5s

    seed, dataset, protocol, client = task
    inputs = [prepared_dir(dataset), *([subject.weights(seed, client)] if subject.pretrained else [])]
    identity = {"task": list(task), "backbone": subject.backbone, "config": asdict(config),
                "image_size": params["pretrain"]["image_size"],
                **({} if reestimates_batchnorm(params) else {"batchnorm": "kept"}),
                "inputs": {path: md5 for path, (md5, _) in input_md5s(project_root(), inputs, lock=False).items()}}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class TaskResult:
    """A task's result record (the result file's content, less its stage and hardware), the config it ran with and
    whether it resumed from a checkpoint or from a finished result of an earlier run of the stage."""

    record: dict[str, Any]
    config: dict[str, Any]
    resumed: str   # "no", "checkpoint" or "result"


def _evaluate_task(subject: Subject, params: dict, stage_name: str, device: str, task: Task) -> TaskResult:
    """One (seed, dataset, protocol[, client]) (runs in a worker)."""
    # The protocols' implementations load by name when a protocol runs (dssl.config.protocols): a stage's
    # code manifests hold those of the protocols its cell runs (``protocol/<names>``), not every protocol's.
    from dssl.evaluation import evaluate
    from dssl.evaluation.batchnorm import reestimate_batchnorm
    from dssl.evaluation.progress import Checkpoint
    from dssl.training.determinism import configure_determinism
    from dssl.training.preemption import checkpoint_interval

    seed, dataset, protocol, client = task
    config = protocol_config(params, protocol, dataset, subject.backbone)
    folder, fingerprint = task_folder(stage_name, task), _fingerprint(subject, params, task, config)
    done = _finished(folder, fingerprint)
    if done is not None:
        return TaskResult({**done, "images_trained": trained_images(config, done["selected"])}, asdict(config),
                          "result")
    configure_determinism(True)
    size = params["pretrain"]["image_size"]
    train, test = _downstream(dataset, size)
    weights = subject.weights(seed, client)
    encoder = _encoder(subject.backbone, size, train.image_shape[0], weights, seed, device,
                       params["evaluate"].get("vit_pool"))
    facts = subject.pretraining_facts(weights, encoder)
    reestimated = subject.pretrained and reestimates_batchnorm(params)
    if reestimated:
        reestimate_batchnorm(encoder, train)
    checkpoint = Checkpoint(folder, fingerprint, checkpoint_interval(params).every_seconds)
    resumed = "checkpoint" if checkpoint.load() is not None else "no"
    result = evaluate(protocol, encoder, train, test, config, seed, checkpoint)
    record = {
        **subject.describe, **facts, "backbone": subject.backbone, "family": backbone_family(subject.backbone),
        "dataset": dataset, "protocol": protocol, "seed": seed, "n_test": len(test),
        "test_acc": float(result["test_acc"]), "val_acc": float(result["val_acc"]),
        "selected": {k: v for k, v in result.items() if k not in ("test_acc", "val_acc")},
        "batchnorm_reestimated": reestimated,
        **({"client": client} if client is not None else {}),
    }
    record["images_trained"] = trained_images(config, record["selected"])
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / RESULT_FILE, {"fingerprint": fingerprint, "record": record})
    checkpoint.remove()
    return TaskResult(record, asdict(config), resumed)


def trained_images(config, outcome: dict[str, Any]) -> int:
    """Images the task passed forward and backward through the encoder, from what the protocol reports it
    ran: full fine-tuning trains every learning rate of its grid for ``max_epochs`` epochs over the fit
    split in the batches ``index_batches`` makes (a trailing batch of one left out); the probes and kNN
    train no encoder (0). A deterministic count, the same for a resumed task: ``dssl plan`` predicts it."""
    from dssl.evaluation.configs import FineTuneConfig

    if not isinstance(config, FineTuneConfig):
        return 0
    import numpy as np

    from dssl.evaluation.common import index_batches

    per_epoch = sum(len(batch) for batch in index_batches(np.arange(int(outcome["num_fit"])), config.batch_size))
    return len(outcome["grid"]) * int(outcome["max_epochs"]) * per_epoch


def _finished(folder: Path, fingerprint: str) -> dict[str, Any] | None:
    """The record a task of these inputs finished with in an earlier run of the stage, if any."""
    path = folder / RESULT_FILE
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text())
    except ValueError:
        return None   # torn or edited: the task runs again
    return saved["record"] if saved.get("fingerprint") == fingerprint else None


def _tasks(params: dict, subject: Subject, seeds: list[int]) -> list[Task]:
    """Every (seed, dataset, protocol[, client]) of the stage: the pairs the tables reading the cell need
    (``config.evaluation_plan``, the function the catalogue and ``dssl plan`` read too)."""
    pairs = stage_pairs(params, subject.framework, subject.key)
    return [(seed, dataset, protocol, client) for seed in seeds for dataset, protocol in pairs
            for client in (subject.clients or (None,))]


def mean_over_clients(results: list[tuple[dict, float]]) -> list[tuple[dict, float]]:
    """Stand-alone results, one per (seed, dataset, protocol): the mean test and validation accuracy over
    the clients' own encoders, each client's kept under ``clients`` (paper B's stand-alone row: every
    client trains and is evaluated on its own)."""
    groups: dict[tuple, list[tuple[dict, float]]] = {}
    for record, rss in results:
        groups.setdefault(_result_key(record), []).append((record, rss))
    merged = []
    for members in groups.values():
        records = [record for record, _ in members]
        first = {k: v for k, v in records[0].items() if k != "client"}
        merged.append(({**first,
                        "test_acc": sum(r["test_acc"] for r in records) / len(records),
                        "val_acc": sum(r["val_acc"] for r in records) / len(records),
                        "images_trained": sum(r.get("images_trained", 0) for r in records),
                        "clients": {str(r["client"]): r["test_acc"] for r in records},
                        "selected": {str(r["client"]): r["selected"] for r in records}},
                       max(rss for _, rss in members)))
    return merged


def _result_key(record: dict) -> tuple:
    return record["seed"], record["dataset"], record["protocol"]


def _clients_merged(outcomes: list[tuple[TaskResult, float]]) -> list[tuple[TaskResult, float]]:
    """``mean_over_clients`` of the tasks' records, each with its tasks' config and how they resumed."""
    tasks: dict[tuple, list[TaskResult]] = {}
    for outcome, _ in outcomes:
        tasks.setdefault(_result_key(outcome.record), []).append(outcome)
    merged = []
    for record, rss in mean_over_clients([(outcome.record, rss) for outcome, rss in outcomes]):
        members = tasks[_result_key(record)]
        resumed = {member.resumed for member in members}
        merged.append((TaskResult(record, members[0].config, resumed.pop() if len(resumed) == 1 else "partly"), rss))
    return merged


def _device(params: dict, subject: Subject, tasks: list[Task]) -> str:
    """The stage's device from every task's config (``device``), resolved before any task starts."""
    requests = {f"evaluate.{protocol}.device ({dataset})":
                protocol_config(params, protocol, dataset, subject.backbone).device
                for _, dataset, protocol, _ in tasks}
    return str(stage_device(requests))


def _run(stage: Stage, subject: Subject, inputs: list[Path]) -> Path:
    params = stage.params
    tasks = _tasks(params, subject, stage.seeds)
    device = _device(params, subject, tasks)
    results = run_tasks(partial(_evaluate_task, subject, params, stage.stage_name, device), tasks, device)
    if subject.clients:
        results = _clients_merged(results)
    read = {"evaluate": _evaluation_read(params, subject),
            "pretrain": {"image_size": params["pretrain"]["image_size"]}, "seeds": stage.seeds}
    strategy = subject.describe.get("strategy")
    if strategy:
        read["strategies"] = {strategy: params["strategies"][strategy]}
    out = metrics_dir(subject.framework, subject.cell)
    written = _write_results(stage, out, [outcome.record for outcome, _ in results])
    records = [
        StageRecord(stage.stage_name, read,
                    {"test_acc": r["test_acc"], "val_acc": r["val_acc"], "worker_peak_rss_mb": rss,
                     "images_trained": float(r.get("images_trained", 0)),
                     "resumed": float(outcome.resumed != "no"),
                     **{f"test_acc client {c}": a for c, a in (r.get("clients") or {}).items()}},
                    inputs=[prepared_dir(r["dataset"]), *inputs, *subject.seed_inputs(r["seed"])],
                    run=evaluation_run(r["seed"], r["dataset"], r["protocol"]), seed=r["seed"],
                    tags={"resumed": outcome.resumed, "device": device, **output}, run_params=outcome.config)
        for (outcome, rss), r, output in zip(results, (o.record for o, _ in results), written)
    ]
    # after the outputs: a failure in between (a full disk, a kill) leaves no run logged, and a rerun logs
    # each once (the outbox remembers what it logged); an unreachable store raises TrackingUnavailable with
    # the results kept and the tasks' results too, so the command run again trains nothing
    stage.log_runs(records)
    for task in tasks:   # outputs and runs complete: the tasks' results are no longer needed
        _remove_task_folder(stage.stage_name, task)
    return out


def _write_results(stage: Stage, out: Path, records: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Each result into ``out/seed-<s>/<dataset>-<protocol>.json`` (one folder, replaced at once); returns,
    per result, the tag its MLflow run carries with the file's md5 (``names.output_tag``). A result holds
    no run id: its run is named after it (``names.result_run_name``), so no file changes once it is logged."""
    machine = hardware_label()
    files = [Path(f"{evaluation_run(r['seed'], r['dataset'], r['protocol'])}.json") for r in records]
    with atomic_dir(out) as tmp:
        for record, file in zip(records, files):
            (tmp / file).parent.mkdir(exist_ok=True)
            write_json(tmp / file, {**record, "stage": stage.stage_name, "hardware": machine})
    return [{output_tag((out / file).as_posix()): file_md5(stage.root / out / file)} for file in files]


def _evaluation_read(params: dict, subject: Subject) -> dict[str, Any]:
    """The ``evaluate`` params a stage reads (its MLflow runs' lineage): the defaults, the entries of the
    grids listing its cell, ``vit_pool`` and every protocol it runs."""
    evaluate = params["evaluate"]
    protocols = dict.fromkeys(protocol for _, protocol in stage_pairs(params, subject.framework, subject.key))
    read = {key: evaluate[key] for key in ("datasets", "vit_pool", "reestimate_batchnorm", *protocols)
            if key in evaluate}
    grids = evaluate.get("grids") or {}
    if subject.framework in ("fl", "decl", "local") and grids:
        named = {grid: grids[grid] for grid in cell_grids(params, subject.framework, subject.key) if grid in grids}
        if named:
            read["grids"] = named
    return read


def _remove_task_folder(stage_name: str, task: Task) -> None:
    """A finished task's result file, then its folders up to the stage's while they are empty."""
    folder = task_folder(stage_name, task)
    (folder / RESULT_FILE).unlink(missing_ok=True)
    stop = (CHECKPOINTS / stage_name).parent
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _describe(params: dict, framework: str, model: ModelSpec | None, partition: str | None = None,
              graph: str | None = None, strategy: str | None = None) -> dict[str, Any]:
    from dssl.topology.graphs import load_graph

    part = params["partitions"].get(partition) if partition else None
    topology = connectivity = None
    if graph is not None:  # read from the graph itself: improved graphs have no target |A| in params
        loaded = load_graph(graph_file(graph))[0]
        improved = graph in (params.get("improved_graphs") or {})
        topology = "improved" if improved else loaded.topology
        connectivity = float(loaded.target_connectivity)
    return {
        "framework": framework, "model": model.name if model else None, "method": model.method if model else None,
        "partition": partition, "scheme": part["scheme"] if part else None,
        "alpha": part.get("alpha") if part else None,
        "graph": graph, "topology": topology, "connectivity": connectivity,
        "strategy": strategy, "strategy_config": params["strategies"][strategy] if strategy else None,
    }


def run_fl(model: str, partition: str, strategy: str, params_path: Path | str) -> Path:
    stage = Stage("evaluate_fl", f"{model}-{partition}-{strategy}", params_path,
                  lambda params: cell_seeds(params, "fl", (model, partition, strategy)))
    params, spec = stage.params, ModelSpec.from_params(stage.params, model)
    subject = Subject("fl", cell_path(model, partition, strategy), spec.backbone,
                      _describe(params, "fl", spec, partition=partition, strategy=strategy),
                      key=(model, partition, strategy))
    return _run(stage, subject, [])


def run_decl(model: str, graph: str, strategy: str, params_path: Path | str) -> Path:
    from dssl.config.lookups import graph_partition
    stage = Stage("evaluate_decl", f"{model}-{graph}-{strategy}", params_path,
                  lambda params: cell_seeds(params, "decl", (model, graph, strategy)))
    params, spec = stage.params, ModelSpec.from_params(stage.params, model)
    subject = Subject("decl", cell_path(model, graph, strategy), spec.backbone,
                      _describe(params, "decl", spec, partition=graph_partition(params, graph), graph=graph,
                                strategy=strategy), key=(model, graph, strategy))
    return _run(stage, subject, [graph_file(graph)])


def run_central(model: str, params_path: Path | str) -> Path:
    stage = Stage("evaluate_central", model, params_path)
    spec = ModelSpec.from_params(stage.params, model)
    subject = Subject("central", model, spec.backbone, _describe(stage.params, "central", spec), key=(model,))
    return _run(stage, subject, [])


def stand_alone_encoders(cell_dir: Path, seeds: list[int]) -> tuple[int, ...]:
    """The clients with an encoder in every seed of a stand-alone cell (``seed-<s>/client-<c>/``)."""
    per_seed = [{int(p.name.split("-")[1]) for p in (cell_dir / seed_dir(s)).glob("client-*")
                 if (p / "encoder.pt").is_file()} for s in seeds]
    common = set.intersection(*per_seed) if per_seed else set()
    if not common or any(found != common for found in per_seed):
        raise ArtifactError(cell_dir, f"the seeds {seeds} do not hold the same stand-alone clients "
                                      f"({[sorted(f) for f in per_seed]})")   # dssl <stage> adds the command
    return tuple(sorted(common))


def run_local(model: str, partition: str, params_path: Path | str) -> Path:
    """Every stand-alone client of the cell evaluated on its own; a seed's result is their mean."""
    stage = Stage("evaluate_local", f"{model}-{partition}", params_path,
                  lambda params: cell_seeds(params, "local", (model, partition)))
    params, spec = stage.params, ModelSpec.from_params(stage.params, model)
    cell = cell_path(model, partition)
    subject = Subject("local", cell, spec.backbone, _describe(params, "local", spec, partition=partition),
                      clients=stand_alone_encoders(model_dir("local", cell), stage.seeds), key=(model, partition))
    return _run(stage, subject, [])


def run_random(backbone: str, params_path: Path | str) -> Path:
    # every seed a cell of this backbone runs: each cell pairs with its random-init reference seed by seed
    stage = Stage("evaluate_random", backbone, params_path,
                  lambda params: reference_seeds(params, backbone))
    subject = Subject("random", backbone, backbone, _describe(stage.params, "random", None), pretrained=False,
                      key=(backbone,))
    return _run(stage, subject, [])

"""The work each stage of a params file does: images, FLOPs, checkpoint and output bytes.

It follows what the stages run, count by count:
- ``pretrain_fl``: every seed's client schedule (``make_schedule``, drawn from the seed as the run draws
  it); a client trains ``local_epochs`` epochs of ``floor(n_k / batch) * batch`` images (``drop_last``)
  in every round its strategy trains (Orchestra's round 0 only clusters). ``pretrain_decl``: every client
  every round. ``pretrain_central``: the pooled set for ``epochs``; ``pretrain_local``: each chosen client
  alone. Client sizes come from the written partition (``partition.json``), else an equal split of the
  dataset (noted: exact for the balanced schemes).
- evaluation: per seed, dataset, protocol (and stand-alone client) the protocol's passes
  (``protocol_work``), over the (dataset, protocol) pairs the stage runs and with the config it runs each
  with (``config.evaluation_plan``: the functions the stage calls); dataset sizes counted in the data
  folder, else as published (noted).
- checkpoints (``client_states``): FL writes the global models plus the state of each client that
  trained since the last checkpoint; DecL every client's row and state each round; central and
  stand-alone training one checkpoint at the end. Bytes are tensor bytes (``costs``).
FLOPs of strategy-side work are not counted (FeatARC's cluster choice and frozen encoder, FedMAR's
alignment term, Orchestra's clustering and server steps): the method's training step is.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dssl.config.study import Study, thawed
from dssl.planning.costs import CostCache, EncoderCosts, backbone_costs, model_costs, state_costs
from dssl.planning.throughput import step_option

FEDAVG = {"name": "fedavg"}  # the strategy of central and stand-alone training (``train_alone``)
STEP_KEYS = ("precision", "channels_last", "compile")


@dataclass
class StageCost:
    """One stage's work over all its seeds (bytes of checkpoints per round: one seed)."""

    stage: str
    kind: str
    model: str | None = None       # the params model it trains or evaluates (None: a random backbone)
    backbone: str | None = None
    images_trained: float = 0.0    # images through a forward and backward pass
    images_forward: float = 0.0    # images through a forward pass only (evaluation)
    flops: dict[str, float] = field(default_factory=dict)   # by step option (``throughput.step_option``)
    checkpoint_round: float = 0.0  # bytes one round's checkpoint writes
    checkpoint_written: float = 0.0
    checkpoint_disk: float = 0.0   # bytes its checkpoints hold once it is done
    outputs: float = 0.0           # bytes of the weights it saves
    notes: list[str] = field(default_factory=list)
    # evaluation: images one seed (and stand-alone client) trains the encoder on, per (dataset, protocol)
    evaluation: dict[tuple[str, str], float] = field(default_factory=dict)
    evaluation_flops: dict[tuple[str, str], float] = field(default_factory=dict)   # every seed, per pair

    @property
    def total_flops(self) -> float:
        return sum(self.flops.values())

    def add_flops(self, option: str, flops: float) -> None:
        self.flops[option] = self.flops.get(option, 0.0) + flops


def per_epoch(size: int, batch: int, drop_last: bool = True) -> int:
    """Images one epoch over ``size`` images trains on (a last partial batch dropped or not)."""
    return (size // batch) * batch if drop_last else size


def evaluation_counts(labels: int, classes: int, fraction: float) -> int:
    """Validation images ``stratified_split`` takes from ``labels`` images of ``classes`` balanced classes."""
    per_class = labels // classes
    return classes * min(max(round(fraction * per_class), 1), per_class - 1) if per_class > 1 else 0


def validation_count(class_counts: list[int], fraction: float) -> int:
    """Validation images ``stratified_split`` takes from a training split of these images per class (a class
    of one image stays in fit): exact where the prepared labels can be counted."""
    return sum(min(max(round(fraction * n), 1), n - 1) for n in class_counts if n > 0)


def eval_epochs(epochs: int, every: int) -> int:
    """Epochs at which a protocol scores its validation split (every ``every``-th and the last)."""
    return sum(1 for e in range(1, epochs + 1) if e % every == 0 or e == epochs)


def protocol_work(config: Any, n_train: int, n_test: int, classes: int, encoder: EncoderCosts,
                  pretrained: bool, class_counts: list[int] | None = None) -> tuple[float, float, float]:
    """(images trained, images forwarded, FLOPs) of one protocol run on one encoder and dataset.

    Linear heads count 2 d C FLOPs per image forward and 6 d C forward + backward (d = feature size).
    ``pretrained``: a pretrained CNN's BatchNorm statistics are re-estimated before it is scored
    (``evaluate.reestimate_batchnorm``): one forward pass over the training images.
    """
    from dssl.evaluation.configs import FewShotConfig, FineTuneConfig, KnnConfig, LinearProbeConfig

    d = encoder.feature_dim
    n_val = (validation_count(class_counts, config.val_fraction) if class_counts is not None
             else evaluation_counts(n_train, classes, config.val_fraction))
    n_fit = n_train - n_val
    forward = n_train if pretrained and encoder.batchnorm else 0
    if isinstance(config, FineTuneConfig):
        trained = config.epochs * (n_fit - (1 if n_fit % config.batch_size == 1 else 0))  # a batch of 1 is skipped
        checked = eval_epochs(config.epochs, config.eval_every) * n_val
        runs = len(config.lr_grid)
        forward += runs * checked + n_test
        flops = (runs * trained * (encoder.train + 6 * d * classes)
                 + forward * encoder.forward + (runs * checked + n_test) * 2 * d * classes)
        return runs * trained, forward, flops
    forward += n_train + n_test  # features of every image, once
    if isinstance(config, KnnConfig):
        return 0.0, forward, forward * encoder.forward + 2 * d * (n_val * n_fit + n_test * n_train)
    if isinstance(config, LinearProbeConfig):  # the few-shot probe trains on its labelled subset
        labelled = (classes * max(round(config.label_fraction * (n_train // classes)), 1)
                    if isinstance(config, FewShotConfig) else n_fit)
        runs = len(config.lr_grid) * len(config.weight_decay_grid)
        head = runs * (config.epochs * labelled * 6 + eval_epochs(config.epochs, config.eval_every) * n_val * 2)
        return 0.0, forward, forward * encoder.forward + (head + 2 * n_test) * d * classes
    raise ValueError(f"the plan has no cost model for {type(config).__name__}: add it to protocol_work")


class Workload:
    """The stage costs of one validated params file, in a project at ``root``."""

    def __init__(self, params: dict, root: Path, cache: CostCache | None = None,
                 folder_notes: dict[str, str] | None = None, outputs: Path | None = None):
        from dssl.data.datasets import DATASETS

        self.params, self.root, self.cache = params, Path(root), cache
        self.study = Study.from_params(params)   # models, strategy entries and their schedules, read once
        # where the params file's stages write (its pipeline folder): the partitions it already wrote
        self.outputs = Path(outputs) if outputs is not None else self.root
        self.size = self.study.image_size
        self.dataset = self.study.dataset
        self.in_chans = DATASETS[self.dataset].image_shape(self.dataset_spec(self.dataset))[0]
        self.folder_notes = dict(folder_notes or {})   # by dataset: why its folder cannot be counted
        self.notes: dict[str, str] = {}   # plan-wide notes, by what they are about
        self._class_counts: dict[str, list[int] | None] = {}

    # -- data ---------------------------------------------------------------------------------------

    def dataset_spec(self, name: str) -> dict:
        """The params entry of a dataset, its folder resolved against the project."""
        spec = dict((self.params.get("datasets") or {}).get(name) or {})
        if spec.get("root") and not Path(spec["root"]).is_absolute():
            spec["root"] = str(self.root / spec["root"])
        return spec

    def sizes(self, name: str) -> dict[str, int]:
        from dssl.data.datasets import DATASETS

        sizes, counted = DATASETS[name].planned_sizes(self.dataset_spec(name))
        if not counted:
            why = self.folder_notes.get(name, f"{name}: no folder to count")
            self.notes[f"sizes of {name}"] = f"{why}: the plan takes the published sizes ({_sizes_text(sizes)})"
        return sizes

    def class_counts(self, name: str) -> list[int] | None:
        """Images per class of a dataset's prepared training split, where ``prepare`` wrote it (a validation
        split's exact size: classes need not be balanced, nor all present); None before, when the plan takes
        the classes as balanced."""
        if name not in self._class_counts:
            from dssl.pipeline.layout import prepared_dir

            folder, counts = self.outputs / prepared_dir(name), None
            if (folder / "meta.json").is_file():
                import numpy as np

                from dssl.data.datasets import load_split

                labels = np.asarray(load_split(folder, "train").labels)
                counts = [int(n) for n in np.bincount(labels)] if len(labels) else None
            self._class_counts[name] = counts
        return self._class_counts[name]

    def client_sizes(self, partition: str) -> list[int]:
        """Images per client: the written partition's, else an equal split of its dataset (noted)."""
        from dssl.pipeline.layout import partition_dir

        written = self.outputs / partition_dir(partition) / "partition.json"
        if written.is_file():
            return [int(n) for n in json.loads(written.read_text())["client_sizes"]]
        spec = self.params["partitions"][partition]
        total, clients = self.sizes(spec["dataset"])["train"], int(spec["clients"])
        if spec["scheme"] not in ("iid", "dirichlet_balanced", "feature"):
            self.notes[f"partition {partition}"] = (f"partition {partition} ({spec['scheme']}) not written yet: "
                                                    "its clients taken as equal-sized")
        return [total // clients + (k < total % clients) for k in range(clients)]

    # -- stages -------------------------------------------------------------------------------------

    def stages(self) -> list[StageCost]:
        from dssl.pipeline.catalogue import instances

        return [self.stage(instance) for instance in instances(self.params)]

    def stage(self, instance) -> StageCost:
        cost = StageCost(instance.name, instance.kind.name)
        handler = getattr(self, f"_{instance.kind.name}", None)
        if handler is None and instance.kind.name.startswith("evaluate_"):
            handler = self._evaluate
        if handler is not None:
            handler(cost, instance.fields)
        return cost

    def seeds(self, fields: dict) -> list[int]:
        """The seeds a stage runs: its cell's (``seeds_key``); a random-init reference's, every seed a cell
        of its backbone runs."""
        from dssl.config.grids import reference_seeds, seeds_at

        if "seeds_key" in fields:
            return seeds_at(self.params, fields["seeds_key"])
        return reference_seeds(self.params, fields["backbone"])

    def _model(self, model: str):
        return model_costs(self.params["models"][model], self.size, self.in_chans, self.cache)

    def _pretraining(self, cost: StageCost, model: str, train: dict, seeds: int) -> None:
        costs = self._model(model)
        cost.model, cost.backbone = model, self.study.models[model].backbone
        cost.add_flops(step_option(**{k: train[k] for k in STEP_KEYS if k in train}), cost.images_trained * costs.train)
        cost.outputs = seeds * (costs.bytes + costs.encoder.bytes)

    def _pretrain_fl(self, cost: StageCost, fields: dict) -> None:
        from dssl.federation import FLConfig, make_schedule
        from dssl.pipeline.pretrain import build_strategy, simulator_config

        train = thawed(self.study.schedule("fl", fields["strategy"]))
        config = FLConfig.from_dict(simulator_config(train))
        sizes = self.client_sizes(fields["partition"])
        spec = self.params["strategies"][fields["strategy"]]   # as params states it: the cost cache's key
        strategy, _ = build_strategy(self.study.strategies[fields["strategy"]])
        states = state_costs(self.params["models"][fields["model"]], spec, self.size, self.in_chans, self.cache)
        epoch = [per_epoch(n, config.batch_size, config.drop_last) for n in sizes]
        seeds = self.seeds(fields)
        for seed in seeds:
            schedule = make_schedule(len(sizes), config.clients_per_round, config.rounds, seed)
            trains = [_trains(strategy, r, config.rounds) for r in range(config.rounds)]
            cost.images_trained += config.local_epochs * sum(epoch[c] for r, chosen in enumerate(schedule)
                                                             if trains[r] for c in chosen)
            written, disk = _fl_checkpoints(schedule, config.checkpoint_every, states.global_bytes, states.client_bytes)
            cost.checkpoint_written += written
            cost.checkpoint_disk += disk
        cost.checkpoint_round = states.global_bytes + config.clients_per_round * states.client_bytes
        self._pretraining(cost, fields["model"], train, len(seeds))

    def _pretrain_decl(self, cost: StageCost, fields: dict) -> None:
        from dssl.federation import DecLConfig
        from dssl.pipeline.pretrain import simulator_config

        train = thawed(self.study.schedule("decl", fields["strategy"]))
        config = DecLConfig.from_dict(simulator_config(train))
        sizes = self.client_sizes(fields["partition"])
        spec = self.params["strategies"][fields["strategy"]]
        states = state_costs(self.params["models"][fields["model"]], spec, self.size, self.in_chans, self.cache)
        per_round = config.local_epochs * sum(per_epoch(n, config.batch_size, config.drop_last) for n in sizes)
        seeds = len(self.seeds(fields))
        cost.images_trained = seeds * config.rounds * per_round
        cost.checkpoint_round = len(sizes) * (states.row_bytes + states.client_bytes + 8)  # + a push-sum weight
        checkpoints = math.ceil(config.rounds / config.checkpoint_every)
        cost.checkpoint_written = seeds * checkpoints * cost.checkpoint_round
        cost.checkpoint_disk = seeds * cost.checkpoint_round
        self._pretraining(cost, fields["model"], train, seeds)

    def _alone(self, cost: StageCost, model: str, sizes: list[int], train: dict, seeds: int) -> None:
        """Central and stand-alone training: each of ``sizes`` trained alone (one FL round, one client)."""
        states = state_costs(self.params["models"][model], FEDAVG, self.size, self.in_chans, self.cache)
        batch = int(train["batch_size"])
        cost.images_trained = seeds * int(train["epochs"]) * sum(per_epoch(n, batch) for n in sizes)
        cost.checkpoint_round = states.global_bytes + states.client_bytes
        cost.checkpoint_written = cost.checkpoint_disk = seeds * len(sizes) * cost.checkpoint_round
        self._pretraining(cost, model, train, seeds)
        cost.outputs *= len(sizes)

    def _pretrain_central(self, cost: StageCost, fields: dict) -> None:
        train = self.study.schedule("central")
        self._alone(cost, fields["model"], [self.sizes(self.dataset)["train"]], train, len(self.seeds(fields)))

    def _pretrain_local(self, cost: StageCost, fields: dict) -> None:
        sizes = self.client_sizes(fields["partition"])
        chosen = self.local_clients(fields["partition"], len(sizes))
        self._alone(cost, fields["model"], [sizes[c] for c in chosen], self.study.schedule("local"),
                    len(self.seeds(fields)))

    def local_clients(self, partition: str, count: int) -> list[int]:
        from dssl.config.grids import local_clients

        return [c for c in local_clients(self.params, partition, count) if 0 <= c < count]

    def _evaluate(self, cost: StageCost, fields: dict) -> None:
        """Every (dataset, protocol) pair the stage runs (``evaluation_plan.stage_pairs``, as the stage does),
        each with the config the stage builds for it (``evaluation_plan.protocol_config``: the dataset's and
        backbone family's overrides resolved); ``evaluation`` keeps the images trained per pair."""
        from dssl.config.evaluation_plan import protocol_config, stage_pairs
        from dssl.data.dataset_specs import DATASET_SPECS
        from dssl.data.datasets import DATASETS

        framework = cost.kind.removeprefix("evaluate_")
        pretrained = framework != "random"
        cost.model = fields.get("model")
        cost.backbone = fields["backbone"] if not pretrained else self.study.models[cost.model].backbone
        clients = 1
        if framework == "local":
            clients = len(self.local_clients(fields["partition"], len(self.client_sizes(fields["partition"]))))
        key = tuple(fields[arg] for arg in _kind_args(cost.kind))
        reestimated = pretrained and bool(self.params["evaluate"].get("reestimate_batchnorm", False))
        runs = len(self.seeds(fields)) * clients
        for dataset, protocol in stage_pairs(self.params, framework, key):
            sizes = self.sizes(dataset)
            channels = DATASETS[dataset].image_shape(self.dataset_spec(dataset))[0]
            encoder = backbone_costs(cost.backbone, self.size, channels, self.cache)
            config = protocol_config(self.params, protocol, dataset, cost.backbone)
            counts = self.class_counts(dataset)
            trained, forward, flops = protocol_work(config, sum(counts) if counts else sizes["train"],
                                                    sizes.get("test", 0), DATASET_SPECS[dataset].num_classes,
                                                    encoder, reestimated, counts)
            cost.images_trained += runs * trained
            cost.images_forward += runs * forward
            cost.evaluation[(dataset, protocol)] = trained
            cost.evaluation_flops[(dataset, protocol)] = runs * flops
            cost.add_flops(step_option(**{k: getattr(config, k) for k in STEP_KEYS}), runs * flops)


def _kind_args(kind: str) -> tuple[str, ...]:
    from dssl.pipeline.catalogue import KINDS_BY_NAME

    return KINDS_BY_NAME[kind].args


def _trains(strategy, round_index: int, rounds: int) -> bool:
    """Whether the strategy's clients train in this round (Orchestra's round 0 only clusters)."""
    import torch

    from dssl.federation.strategies.base import ClientContext

    return strategy.trains(ClientContext(0, round_index, rounds, 0, None, torch.device("cpu"), None))


def _fl_checkpoints(schedule: list[list[int]], every: int, global_bytes: int, client_bytes: int) -> tuple[int, int]:
    """Bytes an FL run's checkpoints write, and hold at the end: each writes the global models and the
    state of every client that trained since the one before."""
    written, pending, ever = 0, set(), set()
    for index, chosen in enumerate(schedule, 1):
        pending |= set(chosen)
        ever |= set(chosen)
        if index % every == 0 or index == len(schedule):
            written += global_bytes + len(pending) * client_bytes
            pending = set()
    return written, global_bytes + len(ever) * client_bytes


def _sizes_text(sizes: dict[str, int]) -> str:
    return ", ".join(f"{split} {n:,}" for split, n in sizes.items())

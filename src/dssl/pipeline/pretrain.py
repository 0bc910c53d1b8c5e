"""Stages ``pretrain_fl@<model>-<partition>``, ``pretrain_decl@<model>-<graph>`` and
``pretrain_central@<model>``: self-supervised pretraining of one model under one framework.

Checkpoints go to ``checkpoints/<stage>/`` (outside the stage's DVC outputs, which DVC deletes before
a run), so a killed stage resumes from its last completed round; the final weights equal those of an
uninterrupted run. The outputs are written only when the run completes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dssl.config.sections import backbone_family
from dssl.pipeline.common import Stage, atomic_dir, graph_file, partition_dir, prepared_dir

CHECKPOINTS = Path("checkpoints")
MODELS = Path("models")


def model_dir(framework: str, model: str, run: str | None = None) -> Path:
    return MODELS / framework / model / run if run else MODELS / framework / model


def configure_threads() -> None:
    """Intra-op threads: DSSL_THREADS, default 1.

    The embedded models are small: on 2 cores, two threads per process gained little on a quiet
    machine and lost up to 10x whenever anything else ran (thread hand-offs stall), and parallel
    Snakemake jobs use the cores better. Raise it for large models.
    """
    import torch

    torch.set_num_threads(int(os.environ.get("DSSL_THREADS", "1")))


def device():
    """DSSL_DEVICE (e.g. 'cpu', 'cuda:1'), else the first GPU when there is one, else the CPU."""
    import torch

    return torch.device(os.environ.get("DSSL_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))


def build_method(params: dict, model: str, seed: int):
    """The model's SSL method, initialised from the run's seed (same seed -> same initial weights)."""
    import torch

    from dssl.methods import create_method

    spec = params["models"][model]
    pretrain = params["pretrain"]
    train = load_pretrain_set(params)
    torch.manual_seed(seed)
    method = create_method(spec["method"], spec["backbone"], pretrain["image_size"], train.image_shape[0],
                           **spec.get("hparams", {}))
    return method.to(device()), train


def load_pretrain_set(params: dict):
    from dssl.data.datasets import load_split
    from dssl.data.imageset import resized

    pretrain = params["pretrain"]
    return resized(load_split(prepared_dir(pretrain["dataset"]), "train"), pretrain["image_size"])


def optimizer_config(params: dict, model: str) -> dict:
    family = backbone_family(params["models"][model]["backbone"])
    return dict(params["pretrain"]["optimizers"][family])


def finish_run(stage: Stage, out: Path, method, result, read: dict, inputs: list[Path], **extra: Any) -> Path:
    """Save the weights (whole method and encoder alone) and the run's history atomically, then log
    the stage with the pretraining dataset and ``inputs`` as its inputs."""
    import torch

    method.load_state_dict(result.final_state)
    method.cpu()  # weights are saved device-free
    with atomic_dir(out) as tmp:
        torch.save(method.state_dict(), tmp / "model.pt")
        torch.save(method.encoder.state_dict(), tmp / "encoder.pt")
        history = {"stage": stage.stage_name, "params": read, **extra, "schedule": result.schedule,
                   "rounds": result.metrics, "resumed_rounds": result.resumed_rounds}
        (tmp / "history.json").write_text(json.dumps(history, indent=1, sort_keys=True, default=float) + "\n")
    stage.log(read, summary_metrics(result), artifacts=[out / "history.json"],
              inputs=[prepared_dir(stage.params["pretrain"]["dataset"]), *inputs])
    return out


def summary_metrics(result) -> dict[str, float]:
    rounds = result.metrics
    return {
        "final_loss": float(rounds[-1]["loss"]),
        "first_loss": float(rounds[0]["loss"]),
        "train_seconds": float(sum(r["train_time_s"] for r in rounds)),
        "images_per_s": float(sum(r["images"] for r in rounds) / max(sum(r["train_time_s"] for r in rounds), 1e-9)),
        "resumed_rounds": float(result.resumed_rounds),
    }


def _train_config(train: dict, drop: tuple[str, ...]) -> dict:
    return {k: v for k, v in train.items() if k not in drop}


def run_fl(model: str, partition: str, params_path: Path | str) -> Path:
    stage = Stage("pretrain_fl", f"{model}-{partition}", params_path)
    params = stage.params
    fl = params["pretrain"]["fl"]["train"]
    configure_threads()
    from dssl.data.partition import load_partition
    from dssl.federation import FLConfig, FLSimulator, clients_from_partition, create_strategy

    method, train_set = build_method(params, model, fl["seed"])
    clients = clients_from_partition(train_set, load_partition(partition_dir(partition)))
    config = FLConfig.from_dict({**_train_config(fl, ("strategy", "aggregation")),
                                 "optimizer": optimizer_config(params, model)})
    strategy = create_strategy(fl["strategy"], aggregation=fl["aggregation"])
    read = _params_read(params, model, {"fl": {"train": fl}}, partitions={partition: params["partitions"][partition]})
    simulator = FLSimulator(method, clients, strategy, config, checkpoint_dir=CHECKPOINTS / stage.stage_name,
                            run_config=read, on_mismatch="restart")
    result = simulator.run()
    return finish_run(stage, model_dir("fl", model, partition), method, result, read, [partition_dir(partition)])


def run_decl(model: str, graph: str, params_path: Path | str) -> Path:
    stage = Stage("pretrain_decl", f"{model}-{graph}", params_path)
    params = stage.params
    decl_section = params["pretrain"]["decl"]
    decl = decl_section["train"]
    configure_threads()
    import numpy as np

    from dssl.data.partition import load_partition
    from dssl.federation import DecLConfig, DecLSimulator, clients_from_partition, create_strategy
    from dssl.topology.graphs import load_graph
    from dssl.topology.mixing import mixing_matrix

    method, train_set = build_method(params, model, decl["seed"])
    partition = load_partition(partition_dir(decl_section["partition"]))
    clients = clients_from_partition(train_set, partition)
    adjacency = load_graph(graph_file(graph))[0].adjacency
    sizes = np.array([len(i) for i in partition.client_indices])
    mixing = mixing_matrix(adjacency, decl["mixing"], sizes)
    config = DecLConfig.from_dict({**_train_config(decl, ("strategy", "mixing")),
                                   "optimizer": optimizer_config(params, model)})
    strategy = create_strategy(decl["strategy"])
    read = _params_read(params, model, {"decl": {"train": decl, "partition": decl_section["partition"]}},
                        graphs={graph: graph_spec(params, graph)})
    simulator = DecLSimulator(method, clients, strategy, mixing, config,
                              checkpoint_dir=CHECKPOINTS / stage.stage_name, run_config=read, on_mismatch="restart")
    result = simulator.run()
    return finish_run(stage, model_dir("decl", model, graph), method, result, read,
                      [partition_dir(decl_section["partition"]), graph_file(graph)], mixing=mixing.tolist())


def run_central(model: str, params_path: Path | str) -> Path:
    """The centralised reference: one 'client' holding the pooled data, trained for ``epochs`` epochs in
    one continuous run (one optimizer for the whole run, as in centralised training)."""
    stage = Stage("pretrain_central", model, params_path)
    params = stage.params
    central = params["pretrain"]["central"]["train"]
    configure_threads()
    import numpy as np

    from dssl.federation import ClientData, FLConfig, FLSimulator, create_strategy

    method, train_set = build_method(params, model, central["seed"])
    pooled = [ClientData(train_set, np.arange(len(train_set), dtype=np.int64))]
    config = FLConfig.from_dict({"rounds": 1, "local_epochs": central["epochs"], "clients_per_round": 1,
                                 "batch_size": central["batch_size"], "seed": central["seed"],
                                 "optimizer": optimizer_config(params, model)})
    read = _params_read(params, model, {"central": {"train": central}})
    simulator = FLSimulator(method, pooled, create_strategy("fedavg"), config,
                            checkpoint_dir=CHECKPOINTS / stage.stage_name, run_config=read, on_mismatch="restart")
    result = simulator.run()
    return finish_run(stage, model_dir("central", model), method, result, read, [])


def graph_spec(params: dict, graph: str) -> dict:
    """A graph's params entry, from 'graphs' or 'improved_graphs'."""
    return (params.get("graphs") or {}).get(graph) or params["improved_graphs"][graph]


def _params_read(params: dict, model: str, framework: dict, **extra: dict) -> dict:
    """Exactly the params a pretraining stage reads (what DVC tracks for it and MLflow logs)."""
    pretrain = params["pretrain"]
    family = backbone_family(params["models"][model]["backbone"])
    read = {
        "models": {model: params["models"][model]},
        "pretrain": {"dataset": pretrain["dataset"], "image_size": pretrain["image_size"],
                     "optimizers": {family: pretrain["optimizers"][family]}, **framework},
    }
    read.update(extra)
    return read

"""Stages ``evaluate_<framework>@...-<dataset>-<protocol>``: score one pretrained encoder (or a randomly
initialised backbone) on one downstream dataset with one protocol (linear probe or full fine-tuning).

Hyper-parameters are chosen on a validation split carved from the training split; the test split is
scored once. The result is one JSON file under ``reports/metrics/`` that the report stage reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dssl.config.sections import backbone_family
from dssl.pipeline.common import Stage, atomic_file, graph_file, prepared_dir
from dssl.pipeline.pretrain import configure_threads, device, model_dir

METRICS = Path("reports/metrics")


def metrics_file(framework: str, run: str, dataset: str, protocol: str) -> Path:
    return METRICS / framework / run / f"{dataset}-{protocol}.json"


def _downstream(params: dict, dataset: str):
    from dssl.data.datasets import load_split
    from dssl.data.imageset import resized

    size = params["pretrain"]["image_size"]
    folder = prepared_dir(dataset)
    return resized(load_split(folder, "train"), size), resized(load_split(folder, "test"), size)


def _encoder(backbone: str, image_size: int, in_chans: int, weights: Path | None):
    import torch

    from dssl.models import create_backbone

    torch.manual_seed(0)  # the random-init reference is the same network every time
    encoder = create_backbone(backbone, image_size, in_chans)
    if weights is not None:
        encoder.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    return encoder.to(device())


def _evaluate(stage: Stage, describe: dict[str, Any], backbone: str, weights: Path | None,
              dataset: str, protocol: str, out: Path, inputs: list[Path]) -> Path:
    params = stage.params
    configure_threads()
    from dssl.evaluation import evaluate

    train, test = _downstream(params, dataset)
    encoder = _encoder(backbone, params["pretrain"]["image_size"], train.image_shape[0], weights)
    config = dict(params["evaluate"][protocol])
    seed = int(config.pop("seed", 0))
    result = evaluate(protocol, encoder, train, test, config, seed)
    record = {
        **describe, "backbone": backbone, "family": backbone_family(backbone), "dataset": dataset,
        "protocol": protocol, "seed": seed, "stage": stage.stage_name,
        "test_acc": float(result["test_acc"]), "val_acc": float(result["val_acc"]),
        "selected": {k: v for k, v in result.items() if k not in ("test_acc", "val_acc")},
    }
    read = {"evaluate": {protocol: params["evaluate"][protocol]},
            "pretrain": {"image_size": params["pretrain"]["image_size"]}}
    run_id = stage.log(read, {"test_acc": record["test_acc"], "val_acc": record["val_acc"]},
                       artifacts=[], inputs=[prepared_dir(dataset), *inputs])
    record["mlflow_run_id"] = run_id
    with atomic_file(out) as tmp:
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    return out


def _describe(params: dict, framework: str, model: str | None, partition: str | None = None,
              graph: str | None = None) -> dict[str, Any]:
    spec = params["models"][model] if model else {}
    part = params["partitions"].get(partition) if partition else None
    topology = connectivity = None
    if graph is not None:  # read from the graph itself: improved graphs have no target |A| in params
        record = json.loads(graph_file(graph).read_text())
        improved = graph in (params.get("improved_graphs") or {})
        topology = "improved" if improved else record["topology"]
        connectivity = float(record["target_connectivity"])
    return {
        "framework": framework, "model": model, "method": spec.get("method"),
        "partition": partition, "scheme": part["scheme"] if part else None,
        "alpha": part.get("alpha") if part else None,
        "graph": graph, "topology": topology, "connectivity": connectivity,
    }


def run_fl(model: str, partition: str, dataset: str, protocol: str, params_path: Path | str) -> Path:
    stage = Stage("evaluate_fl", f"{model}-{partition}-{dataset}-{protocol}", params_path)
    weights = model_dir("fl", model, partition) / "encoder.pt"
    return _evaluate(stage, _describe(stage.params, "fl", model, partition=partition),
                     stage.params["models"][model]["backbone"], weights, dataset, protocol,
                     metrics_file("fl", f"{model}/{partition}", dataset, protocol), [weights])


def run_decl(model: str, graph: str, dataset: str, protocol: str, params_path: Path | str) -> Path:
    stage = Stage("evaluate_decl", f"{model}-{graph}-{dataset}-{protocol}", params_path)
    weights = model_dir("decl", model, graph) / "encoder.pt"
    partition = stage.params["pretrain"]["decl"]["partition"]
    return _evaluate(stage, _describe(stage.params, "decl", model, partition=partition, graph=graph),
                     stage.params["models"][model]["backbone"], weights, dataset, protocol,
                     metrics_file("decl", f"{model}/{graph}", dataset, protocol), [weights])


def run_central(model: str, dataset: str, protocol: str, params_path: Path | str) -> Path:
    stage = Stage("evaluate_central", f"{model}-{dataset}-{protocol}", params_path)
    weights = model_dir("central", model) / "encoder.pt"
    return _evaluate(stage, _describe(stage.params, "central", model), stage.params["models"][model]["backbone"],
                     weights, dataset, protocol, metrics_file("central", model, dataset, protocol), [weights])


def run_random(backbone: str, dataset: str, protocol: str, params_path: Path | str) -> Path:
    stage = Stage("evaluate_random", f"{backbone}-{dataset}-{protocol}", params_path)
    return _evaluate(stage, _describe(stage.params, "random", None), backbone, None, dataset, protocol,
                     metrics_file("random", backbone, dataset, protocol), [])

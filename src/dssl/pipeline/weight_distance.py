"""Stage ``weight_distance@<model>-<partition>-<strategy>``: paper A's Table 5, every seed.

Paper A, appendix A.3.1: "we obtain three pre-trained ViT backbones: (1) a global model trained using
FL across all clients; and (2) two local models trained solely on data from client 1 and client 100",
and reports the sum over layers of the l2 distance between their weights (``weight_distance``).
Here the global model is the FL cell's (``models/fl/<model>/<partition>/<strategy>/seed-<s>``); the
clients ``weight_distance.clients`` of its partition (default: the first and the last) each train alone
from the same initial weights as the FL run (seed s), with the method's own loss, for
``weight_distance.train.epochs`` epochs over their data. The paper does not say how long its local
models train; the default is a client's expected number of local epochs in the FL run. A strategy that
changes the local objective only through what the server sends (FedMAR's z_bar) has nothing to send to
a client that trains alone, so its local models are the plain method's: its column differs from the
plain method's through the global model only.

Distances compare encoder tensors (the backbone the downstream protocols use), so models of different
methods on one backbone compare on the same tensors. Output, per seed: ``seed-<s>/client-<i>.pt`` (the
local encoders) and ``seed-<s>/distances.json``.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from dssl.pipeline.common import Stage, StageError, atomic_dir
from dssl.pipeline.layout import CHECKPOINTS, cell_path, local_model_dir, model_dir, partition_dir, prepared_dir, seed_dir
from dssl.pipeline.pretrain import build_method, optimizer_config
from dssl.pipeline.workers import run_tasks
from dssl.tracking import StageRecord

FORM = "layerwise_sum"   # paper A: the sum over layers of the l2 norm of the difference


def client_label(client: int) -> str:
    """Paper A numbers clients from 1 ("local 1", "local 100")."""
    return f"local {client + 1}"


def _train_local(stage_name: str, params: dict, model: str, partition: str, task: tuple[int, int]) -> dict:
    """One client trained alone from seed s's initial weights; returns its encoder state (CPU)."""
    from dssl.data.partition import load_partition
    from dssl.federation import FLConfig, FLSimulator, clients_from_partition, create_strategy

    seed, client = task
    train = params["weight_distance"]["train"]
    method, train_set = build_method(params, model, seed)
    data = clients_from_partition(train_set, load_partition(partition_dir(partition)))[client]
    config = FLConfig.from_dict({"rounds": 1, "local_epochs": train["epochs"], "clients_per_round": 1,
                                 "batch_size": train["batch_size"], "seed": seed,
                                 "optimizer": optimizer_config(params, model)})
    simulator = FLSimulator(method, [data], create_strategy("fedavg"), config,
                            checkpoint_dir=CHECKPOINTS / stage_name / seed_dir(seed) / f"client-{client}",
                            run_config={"weight_distance": params["weight_distance"], "seed": seed,
                                        "client": client}, on_mismatch="restart")
    result = simulator.run()
    method.load_state_dict(result.final_state)
    return {"encoder": {k: v.detach().cpu() for k, v in method.encoder.state_dict().items()},
            "final_loss": float(result.metrics[-1]["loss"])}


def seed_distances(global_encoder: dict, locals_: dict[int, dict]) -> dict[str, float]:
    """Table 5's rows for one seed: every pair of the local models and the global one."""
    from dssl.federation.weight_distance import pairwise_weight_distances

    models = {**{client_label(c): enc for c, enc in locals_.items()}, "global": global_encoder}
    return {f"{a} vs {b}": d for (a, b), d in pairwise_weight_distances(models, form=FORM).items()}


def _check_clients(params: dict, partition: str) -> list[int]:
    from dssl.data.partition import load_partition

    clients = [int(c) for c in params["weight_distance"]["clients"]]
    count = len(load_partition(partition_dir(partition)).client_indices)
    outside = [c for c in clients if c >= count]
    if outside:
        raise StageError(f"weight_distance.clients {outside} are not clients of partition {partition!r} "
                         f"({count} clients, numbered 0..{count - 1}); fix weight_distance.clients in params.yaml")
    return clients


def run(model: str, partition: str, strategy: str, params_path: Path | str) -> Path:
    import torch

    stage = Stage("weight_distance", f"{model}-{partition}-{strategy}", params_path)
    params = stage.params
    clients = _check_clients(params, partition)
    global_dir = model_dir("fl", cell_path(model, partition, strategy))
    missing = [s for s in stage.seeds if not (global_dir / seed_dir(s) / "encoder.pt").is_file()]
    if missing:
        raise StageError(f"{global_dir} has no encoder.pt for seeds {missing}; run pretrain_fl@{model}-{partition}-"
                         f"{strategy} first")
    tasks = [(seed, client) for seed in stage.seeds for client in clients]
    trained = run_tasks(partial(_train_local, stage.stage_name, params, model, partition), tasks)
    by_task = {task: result for task, (result, _) in zip(tasks, trained)}
    out = local_model_dir(cell_path(model, partition, strategy))
    read = {"models": {model: params["models"][model]}, "weight_distance": {
        k: params["weight_distance"][k] for k in ("clients", "train")}, "seeds": params["seeds"]}
    records = []
    with atomic_dir(out) as tmp:
        for seed in stage.seeds:
            folder = tmp / seed_dir(seed)
            folder.mkdir(parents=True)
            locals_ = {c: by_task[(seed, c)]["encoder"] for c in clients}
            for client, encoder in locals_.items():
                torch.save(encoder, folder / f"client-{client}.pt")
            global_encoder = torch.load(global_dir / seed_dir(seed) / "encoder.pt", map_location="cpu")
            distances = seed_distances(global_encoder, locals_)
            record = {"stage": stage.stage_name, "model": model, "partition": partition, "strategy": strategy,
                      "seed": seed, "clients": clients, "form": FORM, "epochs": params["weight_distance"]["train"]["epochs"],
                      "distances": distances}
            (folder / "distances.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
            metrics = {f"distance {k}": v for k, v in distances.items()}
            metrics.update({f"final_loss {client_label(c)}": by_task[(seed, c)]["final_loss"] for c in clients})
            records.append((seed, metrics))
    stage.log_runs([StageRecord(stage.stage_name, read, metrics, artifacts=[out / seed_dir(seed) / "distances.json"],
                                inputs=[prepared_dir(params["pretrain"]["dataset"]), partition_dir(partition),
                                        global_dir], run=seed_dir(seed), seed=seed)
                    for seed, metrics in records])
    return out

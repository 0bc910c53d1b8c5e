"""Stage ``weight_distance@<model>-<partition>-<strategy>``: paper A's Table 5, every seed.

Paper A, appendix A.3.1: "we obtain three pre-trained ViT backbones: (1) a global model trained using
FL across all clients; and (2) two local models trained solely on data from client 1 and client 100",
and reports the sum over layers of the l2 distance between their weights (``weight_distance``).
Here the global model is the FL cell's (``models/fl/<model>/<partition>/<strategy>/seed-<s>``) and the
local models are the stand-alone clients ``weight_distance.clients`` of ``pretrain_local@<model>-<partition>``
(each trained alone from the same initial weights as the FL run, seed s, for ``pretrain.local.train.epochs``;
the paper does not say how long its local models train). A strategy that changes the local objective only
through what the server sends (FedMAR's z_bar) has nothing to send to a client that trains alone, so the
local models of every strategy of one model and partition are the same stand-alone models: a strategy's
column differs from another's through the global model only.

Distances compare encoder tensors (the backbone the downstream protocols use), so models of different
methods on one backbone compare on the same tensors. Output, per seed: ``seed-<s>/distances.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from dssl.config.grids import local_clients, shared_seeds
from dssl.artifacts import ArtifactError
from dssl.pipeline.common import Stage, atomic_dir
from dssl.pipeline.layout import cell_path, client_dir, distances_dir, model_dir, seed_dir
from dssl.tracking import StageRecord

FORM = "layerwise_sum"   # paper A: the sum over layers of the l2 norm of the difference


def client_label(client: int) -> str:
    """Paper A numbers clients from 1 ("local 1", "local 100")."""
    return f"local {client + 1}"


def seed_distances(global_encoder: dict, locals_: dict[int, dict]) -> dict[str, float]:
    """Table 5's rows for one seed: every pair of the local models and the global one."""
    from dssl.federation.weight_distance import pairwise_weight_distances

    models = {**{client_label(c): enc for c, enc in locals_.items()}, "global": global_encoder}
    return {f"{a} vs {b}": d for (a, b), d in pairwise_weight_distances(models, form=FORM).items()}


def _local_encoder_files(params: dict, model: str, partition: str, clients: list[int],
                         seeds: list[int]) -> dict[tuple[int, int], Path]:
    local_dir = model_dir("local", cell_path(model, partition))
    files = {(seed, c): local_dir / seed_dir(seed) / client_dir(c) / "encoder.pt" for seed in seeds for c in clients}
    missing = sorted({c for (_, c), path in files.items() if not path.is_file()})
    if missing:
        # a partition that names no clients trains every one, so none of ``missing`` is then untrained
        trained = local_clients(params, partition, max(missing) + 1)
        untrained = [c for c in missing if c not in trained]
        hint = f"; clients {untrained} are not among pretrain.local.clients.{partition}" if untrained else ""
        first = next(path for (_, c), path in files.items() if c in missing and not path.is_file())
        raise ArtifactError(first, f"missing (no stand-alone encoder of clients {missing}){hint}")
    return files


def run(model: str, partition: str, strategy: str, params_path: Path | str) -> Path:
    from dssl.artifacts import load_torch

    stage = Stage("weight_distance", f"{model}-{partition}-{strategy}", params_path,
                  lambda params: shared_seeds(params, (model, partition, strategy)))
    params = stage.params
    clients = [int(c) for c in params["weight_distance"]["clients"]]
    global_dir = model_dir("fl", cell_path(model, partition, strategy))
    missing = [s for s in stage.seeds if not (global_dir / seed_dir(s) / "encoder.pt").is_file()]
    if missing:
        raise ArtifactError(global_dir / seed_dir(missing[0]) / "encoder.pt", f"missing (seeds {missing})")
    local_files = _local_encoder_files(params, model, partition, clients, stage.seeds)
    out = distances_dir(cell_path(model, partition, strategy))
    read = {"weight_distance": {"clients": params["weight_distance"]["clients"]}, "seeds": stage.seeds}
    records = []
    with atomic_dir(out) as tmp:
        for seed in stage.seeds:
            locals_ = {c: load_torch(local_files[(seed, c)]) for c in clients}
            global_encoder = load_torch(global_dir / seed_dir(seed) / "encoder.pt")
            distances = seed_distances(global_encoder, locals_)
            record = {"stage": stage.stage_name, "model": model, "partition": partition, "strategy": strategy,
                      "seed": seed, "clients": clients, "form": FORM, "distances": distances}
            folder = tmp / seed_dir(seed)
            folder.mkdir(parents=True)
            (folder / "distances.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
            records.append((seed, {f"distance {k}": v for k, v in distances.items()}))
    stage.log_runs([StageRecord(stage.stage_name, read, metrics, artifacts=[out / seed_dir(seed) / "distances.json"],
                                inputs=[global_dir, model_dir("local", cell_path(model, partition))],
                                run=seed_dir(seed), seed=seed)
                    for seed, metrics in records])
    return out

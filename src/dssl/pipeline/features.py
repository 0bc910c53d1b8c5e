"""Stage ``features@<model>-<partition>-<strategy>``: the data of paper A's Fig. 3, for one seed.

Paper A, appendix A.3.1: "we obtain three pre-trained ViT backbones: (1) a global model trained using FL
across all clients; and (2) two local models trained solely on data from client 1 and client 100 ... we
extract the encoder features of each model. These high-dimensional features are first projected to 20
dimensions using principal component analysis (PCA) and then embedded into 2D space using Umap".
Here the local models are the stand-alone clients ``features.clients`` of ``pretrain_local@<model>-<partition>``
(trained alone from the FL run's initial weights, as Table 5's) and the global model is the FL cell's, of
seed ``features.seed``. Each encoder is evaluated as the evaluate stages evaluate it (BatchNorm statistics
re-estimated on the downstream training images) on a class-stratified subset of ``features.images`` test
images of ``features.dataset``. The 2-D embedding is scikit-learn's t-SNE (UMAP is not among the locked
packages), after PCA to 20 dimensions as in the paper; each model is embedded on its own, as the paper's
panels are.

Outputs, in ``reports/features/<model>/<partition>/<strategy>/``: ``features.npz`` (the test labels, the
image indices and one feature matrix per model), ``embedding.csv`` (model, image index, label, x, y) and
``features.json`` (what was embedded).
"""

from __future__ import annotations

import json
from pathlib import Path

from dssl.config.grids import local_clients
from dssl.config.study import ModelSpec
from dssl.pipeline.common import Stage, atomic_dir
from dssl.pipeline.layout import cell_path, client_dir, features_dir, model_dir, prepared_dir, seed_dir
from dssl.tracking import StageRecord

PCA_DIMENSIONS = 20   # paper A: PCA to 20 dimensions before the 2-D embedding
GLOBAL = "global"


def model_label(client: int) -> str:
    """Paper A numbers clients from 1 ("local 1", "local 100"), as Table 5 does."""
    return f"local {client + 1}"


def encoder_files(params: dict, model: str, partition: str, strategy: str, clients: list[int],
                  seed: int) -> dict[str, Path]:
    """Label -> encoder.pt of every model the figure shows; a missing one is an ``ArtifactError`` on its path,
    to which ``dssl <stage>`` adds the command that writes it (the dispatch knows the catalogue, a stage's
    code does not depend on it)."""
    from dssl.artifacts import ArtifactError

    local_dir = model_dir("local", cell_path(model, partition)) / seed_dir(seed)
    files = {model_label(c): local_dir / client_dir(c) / "encoder.pt" for c in clients}
    files[GLOBAL] = model_dir("fl", cell_path(model, partition, strategy)) / seed_dir(seed) / "encoder.pt"
    missing = [label for label, path in files.items() if not path.is_file()]
    if missing:
        # a partition that names no clients trains every one, so none of ``clients`` is then untrained
        trained = local_clients(params, partition, max(clients, default=-1) + 1)
        untrained = [c for c in clients if c not in trained]
        hint = f"; clients {untrained} are not among pretrain.local.clients.{partition}" if untrained else ""
        raise ArtifactError(files[missing[0]], f"missing (no encoder of {missing} for seed {seed}){hint}")
    return files


def embed(features, seed: int):
    """PCA to ``PCA_DIMENSIONS`` then a 2-D t-SNE (seeded; PCA initialisation) of one model's features.

    One thread, as every task of the pipeline: t-SNE's OpenMP threads were measured 40x slower on a loaded
    2-core machine (15 s against 0.34 s for 60 points), and one thread sums in one order."""
    import numpy as np
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    features = np.asarray(features, dtype=np.float64)
    with threadpool_limits(1):
        reduced = PCA(n_components=min(PCA_DIMENSIONS, *features.shape), random_state=seed).fit_transform(features)
        perplexity = min(30.0, (len(features) - 1) / 3.0)
        return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed,
                    n_jobs=1).fit_transform(reduced)


def _test_subset(labels, images: int | None, seed: int):
    """Indices of a class-stratified subset of ``images`` test images (all of them when fewer)."""
    import numpy as np

    from dssl.evaluation.splits import stratified_split

    if images is None or images >= len(labels):
        return np.arange(len(labels))
    return stratified_split(labels, images / len(labels), seed)[1]


def run(model: str, partition: str, strategy: str, params_path: Path | str) -> Path:
    import numpy as np
    import pandas as pd

    from dssl.data.imageset import save_arrays
    from dssl.evaluation.batchnorm import reestimate_batchnorm
    from dssl.evaluation.common import extract_features
    from dssl.pipeline.evaluate import _downstream, _encoder
    from dssl.pipeline.workers import stage_device

    stage = Stage("features", f"{model}-{partition}-{strategy}", params_path)
    params = stage.params
    section = params["features"]
    seed, dataset = int(section["seed"]), section["dataset"]
    clients = [int(c) for c in section["clients"]]
    files = encoder_files(params, model, partition, strategy, clients, seed)
    device = str(stage_device({}))   # auto: inference on a few hundred images needs no request of its own
    size, backbone = params["pretrain"]["image_size"], ModelSpec.from_params(params, model).backbone
    train, test = _downstream(dataset, size)
    indices = _test_subset(test.labels, section.get("images"), seed)
    labels = np.asarray(test.labels)[indices]
    features, rows = {}, []
    for label, weights in files.items():
        encoder = _encoder(backbone, size, train.image_shape[0], weights, seed, device,
                           params["evaluate"].get("vit_pool"))
        reestimate_batchnorm(encoder, train)
        features[label] = extract_features(encoder, test, indices, batch_size=256).cpu().numpy().astype(np.float32)
        xy = embed(features[label], seed)
        rows += [{"model": label, "index": int(i), "label": int(y), "x": float(a), "y": float(b)}
                 for i, y, (a, b) in zip(indices, labels, xy)]
    out = features_dir(cell_path(model, partition, strategy))
    record = {"stage": stage.stage_name, "model": model, "partition": partition, "strategy": strategy, "seed": seed,
              "clients": clients, "dataset": dataset, "split": "test", "images": int(len(indices)),
              "models": list(files), "embedding": f"PCA to {PCA_DIMENSIONS} dimensions, then 2-D t-SNE"}
    with atomic_dir(out) as tmp:
        # np.savez would stamp the write time into the archive: save_arrays' bytes depend on the arrays only
        save_arrays(tmp / "features.npz", labels=labels, indices=indices,
                    **{name.replace(" ", "_"): matrix for name, matrix in features.items()})
        pd.DataFrame(rows).to_csv(tmp / "embedding.csv", index=False, float_format="%.5f")
        (tmp / "features.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    read = {"features": section, "pretrain": {"image_size": size}, "models": {model: params["models"][model]},
            **({"evaluate": {"vit_pool": params["evaluate"]["vit_pool"]}} if "vit_pool" in params["evaluate"] else {})}
    stage.log_runs([StageRecord(stage.stage_name, read, {"images": float(len(indices))},
                                artifacts=[out / "features.json", out / "embedding.csv"],
                                inputs=[prepared_dir(dataset), *files.values()], run=seed_dir(seed), seed=seed)])
    return out

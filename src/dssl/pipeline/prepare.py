"""Stage ``prepare@<dataset>``: fetch or read a dataset and store it in the pipeline's format."""

from __future__ import annotations

from pathlib import Path

from dssl.pipeline.common import Stage, atomic_dir, prepared_dir
from dssl.pipeline.layout import from_project


def run(name: str, params_path: Path | str) -> Path:
    stage = Stage("prepare", name, params_path)
    spec = stage.entry("datasets")
    from dssl.data.datasets import DATASETS

    out = prepared_dir(name)
    # a relative root (or the default one) names a folder of the project; the stage runs in its params
    # file's pipeline folder
    located = DATASETS[name].resolve(spec)
    if located.get("root"):
        located["root"] = from_project(located["root"])
    with atomic_dir(out) as tmp:
        meta = DATASETS[name].prepare(located, tmp)
    metrics = {f"{split}_size": float(size) for split, size in meta.get("sizes", {}).items()}
    metrics["num_classes"] = float(meta["num_classes"])
    stage.log({"datasets": {name: spec}}, metrics, artifacts=[out / "meta.json"], inputs=[])
    return out

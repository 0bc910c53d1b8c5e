"""Stage ``partition@<name>``: split a prepared training set among clients, deterministically."""

from __future__ import annotations

from pathlib import Path

from dssl.pipeline.common import FIGURES, Stage, atomic_dir, atomic_file, partition_dir, prepared_dir


def figure_path(name: str) -> Path:
    return FIGURES / "partitions" / f"{name}.png"


def run(name: str, params_path: Path | str) -> Path:
    stage = Stage("partition", name, params_path)
    spec = stage.entry("partitions")
    import pandas as pd

    from dssl.data.datasets import load_split
    from dssl.data.partition import create_partition, partition_stats, plot_partition_heatmap, save_partition

    source = prepared_dir(spec["dataset"])
    train = load_split(source, "train")
    partition = create_partition(train.labels, spec, int(spec.get("seed", 0)))
    out = partition_dir(name)
    with atomic_dir(out) as tmp:
        save_partition(partition, train.labels, train.num_classes, tmp)
    counts = pd.read_csv(out / "counts.csv")
    figure = figure_path(name)
    with atomic_file(figure) as tmp_png:
        plot_partition_heatmap(counts, tmp_png, title=f"partition {name} ({spec['scheme']})")
    stage.log(
        {"partitions": {name: spec}},
        partition_stats(counts),
        artifacts=[out / "counts.csv", figure],
        inputs=[source],
    )
    return out

"""Stage ``partitions``: split prepared training sets among clients, deterministically."""

from __future__ import annotations

from pathlib import Path

from dssl.pipeline.common import FIGURES, Stage, atomic_dir, atomic_file, partition_dir, prepared_dir
from dssl.pipeline.layout import PARTITIONS
from dssl.tracking import StageRecord


def figure_path(name: str) -> Path:
    return FIGURES / "partitions" / f"{name}.png"


def build(name: str, spec: dict) -> StageRecord:
    """One partition of the grid, its counts table and heatmap; its MLflow record."""
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
    return StageRecord("partitions", {"partitions": {name: spec}}, partition_stats(counts),
                       artifacts=[out / "counts.csv", figure], inputs=[source], run=name)


def run(params_path: Path | str) -> Path:
    """Stage ``partitions``: every entry of the 'partitions' section, one MLflow run each.

    One stage for all partitions because each takes about a second while DVC's bookkeeping costs
    seconds per stage; a partition whose params did not change is rewritten with the same bytes
    (they are bit-stable), so the stages that read it do not re-run.
    """
    stage = Stage("partitions", "", params_path)
    records = [build(name, spec or {}) for name, spec in (stage.params.get("partitions") or {}).items()]
    stage.log_runs(records)
    return PARTITIONS

"""Stage ``graph@<name>``: a seeded communication graph over a partition's clients, with its mixing
matrices (uniform over the closed neighbourhood, data-size, degree-normalised, Metropolis-Hastings)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dssl.pipeline.common import FIGURES, Stage, StageError, atomic_file, graph_file, partition_dir
from dssl.pipeline.layout import GRAPHS
from dssl.tracking import StageRecord


def figure_path(name: str) -> Path:
    return FIGURES / "graphs" / f"{name}.png"


def client_sizes(partition_name: str) -> np.ndarray:
    """Samples per client, read from the partition's counts table."""
    from dssl.data.partition import load_counts

    return load_counts(partition_dir(partition_name) / "counts.csv").sum(axis=1)


def write_graph(graph, sizes: np.ndarray, name: str, title: str) -> tuple[dict[str, float], list[Path]]:
    """Save a graph with every mixing matrix, and its drawing; returns (statistics, written files)."""
    from dssl.reporting.graph_figure import plot_graph
    from dssl.topology.graphs import save_graph
    from dssl.config.mixing import MIXING_SPECS
    from dssl.topology.mixing import mixing_matrix

    mixings = {rule: mixing_matrix(graph.adjacency, rule, sizes) for rule in MIXING_SPECS.names()}
    out = graph_file(name)
    with atomic_file(out) as tmp:
        stats = save_graph(graph, mixings, tmp)
    figure = figure_path(name)
    with atomic_file(figure) as tmp_png:
        plot_graph(graph, tmp_png, title=f"{title}, |A| = {stats['connectivity_mean']:.2f}")
    return stats, [out, figure]


def build(name: str, spec: dict) -> StageRecord:
    """One graph of the grid with its mixing matrices and drawing; its MLflow record."""
    from dssl.topology.graphs import GraphError, create_graph

    sizes = client_sizes(spec["partition"])
    try:
        graph = create_graph(spec, len(sizes), int(spec.get("seed", 0)))
    except GraphError as err:
        raise StageError(f"graphs.{name}: {err}") from err
    stats, written = write_graph(graph, sizes, name, f"graph {name}: {graph.topology}")
    return StageRecord("graphs", {"graphs": {name: spec}}, stats, artifacts=written,
                       inputs=[partition_dir(spec["partition"]) / "counts.csv"], run=name)


def run(params_path: Path | str) -> Path:
    """Stage ``graphs``: every entry of the 'graphs' section, one MLflow run each.

    One stage for all graphs because each takes well under a second while DVC's bookkeeping costs
    seconds per stage; a graph whose params did not change is rewritten with the same bytes, so the
    stages that read it do not re-run.
    """
    stage = Stage("graphs", "", params_path)
    records = [build(name, spec or {}) for name, spec in (stage.params.get("graphs") or {}).items()]
    stage.log_runs(records)
    return GRAPHS

"""Where every stage output lives: one vocabulary for the stage catalogue, the stages and the report.

A stage output is a folder or file named after the registry names of params.yaml, so a path says
which grid entry produced it (``models/fl/<model>/<partition>/<strategy>/seed-<s>/``).
"""

from __future__ import annotations

from pathlib import Path

PREPARED = Path("data/prepared")
PARTITIONS = Path("data/partitions")
GRAPHS = Path("data/graphs")
MODELS = Path("models")
METRICS = Path("reports/metrics")
FIGURES = Path("reports/figures")
REPORTS = Path("reports")
THEORY = REPORTS / "theory"
CHECKPOINTS = Path("checkpoints")  # resumption aids, outside DVC's outputs (DVC deletes those first)


def prepared_dir(dataset: str) -> Path:
    return PREPARED / dataset


def partition_dir(name: str) -> Path:
    return PARTITIONS / name


def partition_figure(name: str) -> Path:
    return FIGURES / "partitions" / f"{name}.png"


def graph_file(name: str) -> Path:
    return GRAPHS / name / "graph.json"


def graph_figure(name: str) -> Path:
    return FIGURES / "graphs" / f"{name}.png"


def seed_dir(seed: int) -> str:
    return f"seed-{seed}"


def cell_path(model: str, place: str | None = None, strategy: str | None = None) -> str:
    """``<model>[/<partition or graph>/<strategy>]``: a cell's folder under models/ and reports/metrics/."""
    return "/".join(part for part in (model, place, strategy) if part)


def model_dir(framework: str, cell: str) -> Path:
    """All seeds of one pretraining cell (``cell`` = ``<model>`` or ``<model>/<partition or graph>``)."""
    return MODELS / framework / cell


def client_dir(client: int) -> str:
    """One stand-alone client's folder inside a seed folder of ``models/local/<model>/<partition>/``."""
    return f"client-{client}"


DISTANCES = REPORTS / "distances"


def distances_dir(cell: str) -> Path:
    """Paper A's Table 5 measurements of one FL cell (``<model>/<partition>/<strategy>``), every seed."""
    return DISTANCES / cell


FEATURES = REPORTS / "features"


def features_dir(cell: str) -> Path:
    """Paper A's Fig. 3 data of one FL cell (``<model>/<partition>/<strategy>``): test features and their
    2-D embedding of its stand-alone clients and global model."""
    return FEATURES / cell


def metrics_dir(framework: str, cell: str) -> Path:
    """All evaluation results of one pretrained cell (or random-init backbone), every seed."""
    return METRICS / framework / cell


def metrics_file(framework: str, cell: str, seed: int, dataset: str, protocol: str) -> Path:
    return metrics_dir(framework, cell) / seed_dir(seed) / f"{dataset}-{protocol}.json"

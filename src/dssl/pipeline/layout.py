"""Where every stage output lives: one vocabulary for the stage catalogue, the stages and the report.

A stage output is a folder or file named after the registry names of params.yaml, so a path says
which grid entry produced it (``models/fl/<model>/<partition>/<strategy>/seed-<s>/``).

Every path below is relative to a *pipeline folder*, where the stages of one params file run (their
working directory) and where its dvc.yaml files, outputs, checkpoints and tracking store lie: the
project itself for the project's ``params.yaml`` (the embedded default), ``runs/<profile>/`` for any
other params file (``configs/paper.yaml``: ``runs/paper/``), so a profile's outputs and DVC records
never land on another's. Relative folders inside a params file (``datasets.<name>.root``) name
folders of the project, wherever the pipeline folder is.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dssl.config.params import project_of

PREPARED = Path("data/prepared")
PARTITIONS = Path("data/partitions")
GRAPHS = Path("data/graphs")
MODELS = Path("models")
METRICS = Path("reports/metrics")
FIGURES = Path("reports/figures")
REPORTS = Path("reports")
THEORY = REPORTS / "theory"
CHECKPOINTS = Path("checkpoints")  # resumption aids, outside DVC's outputs (DVC deletes those first)
# The strategy central and stand-alone pretraining run with (one client per run: FedAvg of one model);
# the catalogue makes those stages depend on its code.
SINGLE_CLIENT_STRATEGY = "fedavg"


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


EMBEDDED_PARAMS = "params.yaml"
RUNS = Path("runs")
_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def pipeline_folder(params_file: Path | str, params: dict, project: Path) -> Path:
    """The pipeline folder of a params file, relative to ``project``: ``.`` for the project's
    params.yaml, ``runs/<profile>`` for any other file. Raises ValueError for a profile that cannot
    name a folder."""
    params_file = Path(params_file)
    absolute = params_file if params_file.is_absolute() else Path(project) / params_file
    if absolute.resolve() == (Path(project) / EMBEDDED_PARAMS).resolve():
        return Path(".")
    profile = str(params.get("profile", "default"))
    if not _FOLDER_NAME.fullmatch(profile):
        raise ValueError(f"profile {profile!r} of {params_file} cannot name its pipeline folder {RUNS}/<profile>: "
                         "use letters, digits, '.', '_' and '-'")
    return RUNS / profile


def project_folder(start: Path | None = None) -> Path:
    """The project a pipeline folder belongs to (absolute): the nearest folder, from ``start`` (default:
    the working directory) up, holding the Snakefile (a pipeline folder under runs/ holds none)."""
    here = Path(start or Path.cwd()).resolve()
    return project_of(here) or here


def from_project(path: str | Path) -> str:
    """A project-relative path (absolute ones are kept) as seen from the working directory, the
    pipeline folder a stage runs in: ``data/raw/x`` stays as it is in the project, and is
    ``../../data/raw/x`` in runs/<profile>/."""
    if Path(path).is_absolute():
        return str(path)
    return os.path.relpath(project_folder() / path, Path.cwd())

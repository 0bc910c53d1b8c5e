"""Evaluation result files: loading, validation and aggregation over seeds.

Each evaluate stage writes one JSON per (pretrained model x downstream dataset x protocol x seed).
Paper A (FedMAR, ICLR 2026) reports every number as the mean of 3 trials without a spread; the report
keeps the mean with two separate errors (see ``stats``): the 95 % Student-t interval over seeds and the
test-set sampling error (Wilson interval on ``n_test`` images). A result holds no MLflow run id: its
run is named after it (``run_name``, ``tracking.names.result_run_name``), and the report, an output of
its results alone, names the runs by that name.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from dssl.artifacts import ArtifactError, read_json
from dssl.config.protocols import PROTOCOL_SPECS
from dssl.reporting.stats import binomial_interval, seed_interval
from dssl.tracking.names import result_run_name

REQUIRED_KEYS = (
    "framework", "model", "method", "backbone", "family",
    "partition", "scheme", "alpha",
    "graph", "topology", "connectivity",
    "dataset", "protocol", "test_acc", "val_acc", "seed", "stage",
)
# Keys of newer result files; older files read as these defaults.
OPTIONAL_KEYS: dict[str, Any] = {"n_test": None, "strategy": None, "strategy_config": None,
                                  "encoder_parameters": None, "method_parameters": None, "hardware": None,
                                  "rounds": None}
SUMMARY_COLUMNS = ["mean", "ci", "n", "test_ci", "runs"]


def load_results(folder: Path | str, within: Iterable[Path | str] | None = None) -> pd.DataFrame:
    """All result JSONs under ``folder`` (recursively), one row each, plus the ``file`` they came from and
    the ``run_name`` of their MLflow run. ``within``: the result folders of the stages the params hold now
    (``catalogue.result_folders``); a file outside them (``stray_results``) is not read.

    Raises ``ArtifactError`` (a ValueError) naming the file and the problem (bad JSON, missing key,
    unknown protocol, accuracy outside [0, 1]), and when the folder is missing or holds no result file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ArtifactError(folder, "the result folder does not exist (no evaluation has run yet?)")
    files = sorted(folder.rglob("*.json"))
    if within is not None:
        stray = set(stray_results(files, within))
        files = [path for path in files if path not in stray]
    if not files:
        raise ArtifactError(folder, "no result files (*.json) under this folder")
    rows = [_read_result(path) for path in files]
    # object columns keep None as None (pandas' string dtype would turn it into NaN)
    df = pd.DataFrame(rows, columns=[*REQUIRED_KEYS, *OPTIONAL_KEYS, "file", "run_name"], dtype=object)
    return df.astype({"alpha": float, "connectivity": float, "test_acc": float, "val_acc": float, "seed": int})


def stray_results(files: Iterable[Path], within: Iterable[Path | str]) -> list[Path]:
    """The result files that lie in none of the folders ``within``: left by a cell the params no longer hold
    (DVC does not delete a removed stage's outputs), so no number of the current run."""
    folders = [Path(w).resolve() for w in within]
    return [path for path in files if not any(path.resolve().is_relative_to(f) for f in folders)]


def _read_result(path: Path) -> dict[str, Any]:
    record = read_json(path, REQUIRED_KEYS)
    _check_values(path, record)
    return {**{key: record[key] for key in REQUIRED_KEYS},
            **{key: record.get(key, default) for key, default in OPTIONAL_KEYS.items()}, "file": str(path),
            "run_name": result_run_name(record)}


def _check_values(path: Path, record: dict[str, Any]) -> None:
    if record["protocol"] not in PROTOCOL_SPECS:
        raise ArtifactError(path, f"key 'protocol' is {record['protocol']!r}, expected one of {PROTOCOL_SPECS.names()}")
    if not isinstance(record["framework"], str) or not record["framework"]:
        raise ArtifactError(path, f"key 'framework' must be a name, got {record['framework']!r}")
    if not _is_int(record["seed"]):
        raise ArtifactError(path, f"key 'seed' must be an integer, got {record['seed']!r}")
    accuracy = record["test_acc"]
    if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) or not 0.0 <= accuracy <= 1.0:
        raise ArtifactError(path, f"key 'test_acc' must be a number in [0, 1], got {accuracy!r}")
    n_test = record.get("n_test")
    if n_test is not None and (not _is_int(n_test) or n_test < 1):
        raise ArtifactError(path, f"key 'n_test' must be a positive integer, got {n_test!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def summarise(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Test accuracy in percent per group of ``by``: mean, 95 % seed interval, n, test-set error, runs.

    ``ci`` is the half-width of the Student-t interval over seeds (NaN when n = 1); ``test_ci`` the
    half-width of the Wilson interval of the mean accuracy on the group's test-set size (NaN when the
    results do not record ``n_test``). ``runs`` is a sorted tuple of (seed, stage, MLflow run name), the
    lineage of the group's number. Groups keep first-appearance order; None keys form groups of their own.
    """
    by = list(by)
    rows = []
    for key, group in df.groupby(by, dropna=False, sort=False):
        rows.append({
            **{column: _missing_as_none(value) for column, value in zip(by, key)},
            **accuracy_summary(group),
        })
    summary = pd.DataFrame(rows, columns=[*by, *SUMMARY_COLUMNS], dtype=object)
    return summary.astype({"mean": float, "ci": float, "n": int, "test_ci": float})


def accuracy_summary(group: pd.DataFrame) -> dict[str, Any]:
    """Mean accuracy (%) of one group of results with its seed and test-set half-widths and lineage."""
    accuracy = [float(a) for a in group["test_acc"]]
    seeds = seed_interval(accuracy)
    n_test = _common_test_size(group)
    test = binomial_interval(seeds.mean, n_test) if n_test else None
    runs = zip(group["seed"], group["stage"], group["run_name"])
    return {
        "mean": 100.0 * seeds.mean,
        "ci": 100.0 * seeds.half_width,
        "n": seeds.n,
        "test_ci": 100.0 * test.half_width if test else math.nan,
        "runs": tuple(sorted(runs, key=lambda run: (run[0], run[1]))),
    }


def _common_test_size(group: pd.DataFrame) -> int | None:
    sizes = {int(n) for n in group.get("n_test", pd.Series(dtype=object)) if n is not None and not pd.isna(n)}
    return sizes.pop() if len(sizes) == 1 else None


def accuracy_by_seed(group: pd.DataFrame) -> dict[int, float]:
    """{seed: test accuracy} of one cell; raises ValueError when a seed occurs twice (mixed cells)."""
    seeds = [int(s) for s in group["seed"]]
    if len(seeds) != len(set(seeds)):
        repeated = sorted({s for s in seeds if seeds.count(s) > 1})
        raise ValueError(f"seed(s) {repeated} occur more than once in one cell: "
                         f"{sorted(set(group['stage']))}; select one model and partition per cell")
    return dict(zip(seeds, (float(a) for a in group["test_acc"])))


def _missing_as_none(value: Any) -> Any:
    """groupby hands a None key back as NaN; the summary keeps it None like the loaded results."""
    return None if isinstance(value, float) and math.isnan(value) else value


DISTANCE_KEYS = ("stage", "model", "partition", "strategy", "seed", "clients", "form", "distances")


def load_weight_distances(folder: Path | str) -> pd.DataFrame:
    """Paper A's Table 5 measurements: every ``distances.json`` under ``folder`` (the weight_distance
    stages' outputs), one row per (cell, seed, pair of models) with its ``distance``. An absent folder
    (no weight_distance stage in this build) gives an empty frame; a damaged file raises naming it."""
    folder = Path(folder)
    columns = ["model", "partition", "strategy", "seed", "pair", "distance", "form", "stage", "file"]
    if not folder.is_dir():
        return pd.DataFrame(columns=columns)
    rows = []
    for path in sorted(folder.rglob("distances.json")):
        record = read_json(path, DISTANCE_KEYS)
        distances = record["distances"]
        if not isinstance(distances, dict) or not distances or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in distances.values()):
            raise ArtifactError(path, "key 'distances' must map model pairs to non-negative numbers, "
                                      f"got {distances!r}")
        rows += [{"model": record["model"], "partition": record["partition"], "strategy": record["strategy"],
                  "seed": int(record["seed"]), "pair": pair, "distance": float(value), "form": record["form"],
                  "stage": record["stage"], "file": str(path)} for pair, value in distances.items()]
    return pd.DataFrame(rows, columns=columns)


def load_graph_stats(folder: Path | str) -> dict[str, dict[str, float]]:
    """The statistics of every ``graph.json`` under ``folder`` (the graph stages' outputs), by graph name
    (its folder): degrees, spectral gaps, each mixing rule's distance to the uniform matrix. An absent
    folder (no graph in this build) gives none; a damaged file raises naming it."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    stats = {}
    for path in sorted(folder.glob("*/graph.json")):
        record = read_json(path, ("stats",))
        if not isinstance(record["stats"], dict):
            raise ArtifactError(path, "key 'stats' must be a mapping of statistics")
        stats[path.parent.name] = dict(record["stats"])
    return stats

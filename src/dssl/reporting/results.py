"""Evaluation result files: loading, validation and aggregation over seeds.

Each evaluate stage writes one JSON per (pretrained model x downstream dataset x protocol). Paper A
(FedMAR, ICLR 2026) reports every number as the mean of 3 trials without a spread; the report keeps the
mean and, when several seeds exist, the std and n, so that gaps can be judged against seed noise.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from dssl.artifacts import ArtifactError, read_json

REQUIRED_KEYS = (
    "framework", "model", "method", "backbone", "family",
    "partition", "scheme", "alpha",
    "graph", "topology", "connectivity",
    "dataset", "protocol", "test_acc", "val_acc", "seed", "stage", "mlflow_run_id",
)
FRAMEWORKS = ("fl", "decl", "central", "random")
PROTOCOLS = ("linear_probe", "finetune")


def load_results(folder: Path | str) -> pd.DataFrame:
    """All result JSONs under ``folder`` (recursively), one row each, plus the ``file`` they came from.

    Raises ``ArtifactError`` (a ValueError) naming the file and the problem (bad JSON, missing key,
    unknown framework or protocol, accuracy outside [0, 1]), and when the folder is missing or holds
    no result file at all.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ArtifactError(folder, "the result folder does not exist (no evaluation has run yet?)")
    files = sorted(folder.rglob("*.json"))
    if not files:
        raise ArtifactError(folder, "no result files (*.json) under this folder")
    rows = [_read_result(path) for path in files]
    # object columns keep None as None (pandas' string dtype would turn it into NaN)
    df = pd.DataFrame(rows, columns=[*REQUIRED_KEYS, "file"], dtype=object)
    return df.astype({"alpha": float, "connectivity": float, "test_acc": float, "val_acc": float, "seed": int})


def _read_result(path: Path) -> dict[str, Any]:
    record = read_json(path, REQUIRED_KEYS)
    _check_values(path, record)
    return {**{key: record[key] for key in REQUIRED_KEYS}, "file": str(path)}


def _check_values(path: Path, record: dict[str, Any]) -> None:
    if record["framework"] not in FRAMEWORKS:
        raise ArtifactError(path, f"key 'framework' is {record['framework']!r}, expected one of {FRAMEWORKS}")
    if record["protocol"] not in PROTOCOLS:
        raise ArtifactError(path, f"key 'protocol' is {record['protocol']!r}, expected one of {PROTOCOLS}")
    if not isinstance(record["seed"], int) or isinstance(record["seed"], bool):
        raise ArtifactError(path, f"key 'seed' must be an integer, got {record['seed']!r}")
    accuracy = record["test_acc"]
    if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) or not 0.0 <= accuracy <= 1.0:
        raise ArtifactError(path, f"key 'test_acc' must be a number in [0, 1], got {accuracy!r}")


def summarise(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Test accuracy in percent per group of ``by``: mean, std (NaN when n = 1), n, and the runs.

    ``runs`` is a sorted tuple of (seed, stage, mlflow_run_id), the lineage of the group's number.
    Groups keep first-appearance order; None keys form groups of their own.
    """
    by = list(by)
    rows = []
    for key, group in df.groupby(by, dropna=False, sort=False):
        accuracy = 100.0 * group["test_acc"].astype(float)
        runs = zip(group["seed"], group["stage"], group["mlflow_run_id"])
        rows.append({
            **{column: _missing_as_none(value) for column, value in zip(by, key)},
            "mean": float(accuracy.mean()),
            "std": float(accuracy.std(ddof=1)) if len(accuracy) > 1 else math.nan,
            "n": len(accuracy),
            "runs": tuple(sorted(runs, key=lambda run: (run[0], run[1]))),
        })
    summary = pd.DataFrame(rows, columns=[*by, "mean", "std", "n", "runs"], dtype=object)
    return summary.astype({"mean": float, "std": float, "n": int})


def _missing_as_none(value: Any) -> Any:
    """groupby hands a None key back as NaN; the summary keeps it None like the loaded results."""
    return None if isinstance(value, float) and math.isnan(value) else value


def pooled_std(stds: Sequence[float], ns: Sequence[int]) -> float | None:
    """sqrt(sum (n_i - 1) s_i^2 / sum (n_i - 1)) over the groups with a spread; None when none has one."""
    spread = [(s, n) for s, n in zip(stds, ns) if n > 1 and not math.isnan(s)]
    dof = sum(n - 1 for _, n in spread)
    if dof == 0:
        return None
    return math.sqrt(sum((n - 1) * s * s for s, n in spread) / dof)


def within_noise(gap: float, stds: Sequence[float], ns: Sequence[int]) -> bool | None:
    """Whether |gap| is smaller than the pooled seed std of the groups compared (None: std unknown)."""
    noise = pooled_std(stds, ns)
    return None if noise is None else bool(abs(gap) < noise)

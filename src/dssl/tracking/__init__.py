"""Experiment tracking: every stage run becomes one MLflow run with its lineage."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dssl.tracking.lineage import content_hash, engine, git_state, params_hash
from dssl.tracking.mlflow_store import init_store, project_root, tracking_uri

__all__ = ["StageRecord", "log_stage", "init_store", "project_root", "stage_runs", "tracking_uri"]


_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_\-. :/]")


def metric_name(name: str) -> str:
    """MLflow accepts alphanumerics, _ - . space : / in names; anything else becomes '_'."""
    return _INVALID_NAME_CHARS.sub("_", name)


def _flatten(prefix: str, value, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, sub in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), sub, out)
    else:
        out[prefix] = str(value)[:6000]


@dataclass
class StageRecord:
    """What one stage run produced: logged as one MLflow run named after the stage."""

    stage: str
    params: dict
    metrics: dict[str, float] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)
    inputs: list[Path] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


def log_stage(record: StageRecord, profile: str, root: Path | None = None) -> str:
    """Log a finished stage to the project's MLflow store; returns the run id."""
    import mlflow

    root = root or project_root()
    experiment_id = init_store(root, profile)
    flat: dict[str, str] = {}
    _flatten("", record.params, flat)
    tags = {
        "stage": record.stage,
        "profile": profile,
        "params_hash": params_hash(record.params),
        **git_state(root),
        **engine(),
        **{f"input.{Path(p).as_posix()}": content_hash(root / p) for p in record.inputs},
        **record.tags,
    }
    # mlflow.source.git.commit is what the MLflow UI shows as the version of a run.
    tags["mlflow.source.git.commit"] = tags["git_commit"]
    with mlflow.start_run(experiment_id=experiment_id, run_name=record.stage) as run:
        mlflow.log_params({metric_name(k): v for k, v in flat.items()})
        mlflow.set_tags(tags)
        if record.metrics:
            mlflow.log_metrics({metric_name(k): float(v) for k, v in record.metrics.items()})
        for artifact in record.artifacts:
            mlflow.log_artifact(str(root / artifact))
        return run.info.run_id


def stage_runs(root: Path, profile: str):
    """All stage runs of a profile in the project's store, as a DataFrame (one row per run).

    Columns: run_id, stage, start_time, ``tags.<name>``, ``params.<name>`` and ``metrics.<name>``.
    The client is bound to this project's URI explicitly, so several projects can be read from one
    process.
    """
    import mlflow
    import pandas as pd

    from dssl.tracking.mlflow_store import experiment_name

    client = mlflow.MlflowClient(tracking_uri=tracking_uri(root))
    experiment = client.get_experiment_by_name(experiment_name(profile))
    if experiment is None:
        return pd.DataFrame(columns=["run_id", "stage", "start_time"])
    rows = []
    for run in client.search_runs([experiment.experiment_id], max_results=50000):
        row = {"run_id": run.info.run_id, "stage": run.data.tags.get("stage"), "start_time": run.info.start_time}
        row.update({f"tags.{k}": v for k, v in run.data.tags.items()})
        row.update({f"params.{k}": v for k, v in run.data.params.items()})
        row.update({f"metrics.{k}": v for k, v in run.data.metrics.items()})
        rows.append(row)
    return pd.DataFrame(rows)

"""Experiment tracking: every stage run becomes one MLflow run with its lineage."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from dssl.tracking.lineage import content_hash, engine, git_state, hardware, params_hash
from dssl.tracking.mlflow_store import init_store, project_root, tracking_uri

__all__ = ["StageRecord", "log_stage", "log_stages", "init_store", "project_root", "stage_runs", "tracking_uri"]


BATCH = 100
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
    """What one run of a stage produced: logged as one MLflow run.

    A stage that runs several seeds logs one record per seed (per result file), each with its
    ``run`` suffix (``seed-1``, ``seed-1/digits-linear_probe``) in the run name and its ``seed`` tag.
    """

    stage: str
    params: dict
    metrics: dict[str, float] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)
    inputs: list[Path] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    run: str = ""
    seed: int | None = None

    @property
    def run_name(self) -> str:
        return f"{self.stage}/{self.run}" if self.run else self.stage


def _run_tags(record: StageRecord, profile: str, root: Path, common: dict[str, str]) -> dict[str, str]:
    tags = {
        "stage": record.stage,
        "profile": profile,
        "params_hash": params_hash(record.params),
        **common,
        **{f"input.{Path(p).as_posix()}": content_hash(root / p) for p in record.inputs},
        **record.tags,
    }
    if record.seed is not None:
        tags["seed"] = str(record.seed)
    # mlflow.source.git.commit is what the MLflow UI shows as the version of a run.
    tags["mlflow.source.git.commit"] = tags["git_commit"]
    return tags


def log_stages(records: list[StageRecord], profile: str, root: Path | None = None) -> list[str]:
    """Log finished stage runs to the project's MLflow store, one batch call each; returns run ids."""
    import mlflow
    from mlflow.entities import Metric, Param, RunTag

    root = root or project_root()
    experiment_id = init_store(root, profile)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(root))
    common = {**git_state(root), **engine(), **hardware()}
    run_ids = []
    for record in records:
        flat: dict[str, str] = {}
        _flatten("", record.params, flat)
        tags = _run_tags(record, profile, root, common)
        run = client.create_run(experiment_id, run_name=record.run_name)
        now = int(time.time() * 1000)
        metrics = [Metric(metric_name(k), float(v), now, 0) for k, v in record.metrics.items()]
        params = [Param(metric_name(k), v) for k, v in flat.items()]
        run_tags = [RunTag(k, v) for k, v in tags.items()]
        # MLflow caps one batch at 1000 metrics, 100 params and 100 tags.
        for start in range(0, max(len(metrics), len(params), len(run_tags)), BATCH):
            client.log_batch(run.info.run_id, metrics=metrics[start:start + BATCH],
                             params=params[start:start + BATCH], tags=run_tags[start:start + BATCH])
        for artifact in record.artifacts:
            client.log_artifact(run.info.run_id, str(root / artifact))
        client.set_terminated(run.info.run_id)
        run_ids.append(run.info.run_id)
    return run_ids


def log_stage(record: StageRecord, profile: str, root: Path | None = None) -> str:
    """Log one finished stage run; returns the run id."""
    return log_stages([record], profile, root)[0]


def stage_runs(root: Path, profile: str):
    """All stage runs of a profile in the project's store, as a DataFrame (one row per run).

    Columns: run_id, run_name, stage, start_time, ``tags.<name>``, ``params.<name>`` and ``metrics.<name>``.
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
        row = {"run_id": run.info.run_id, "run_name": run.info.run_name, "stage": run.data.tags.get("stage"),
               "start_time": run.info.start_time}
        row.update({f"tags.{k}": v for k, v in run.data.tags.items()})
        row.update({f"params.{k}": v for k, v in run.data.params.items()})
        row.update({f"metrics.{k}": v for k, v in run.data.metrics.items()})
        rows.append(row)
    return pd.DataFrame(rows)

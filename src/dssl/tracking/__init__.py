"""Experiment tracking: every stage run becomes one MLflow run with its lineage.

Input md5s come from where they were computed already (``inputs``); runs the store cannot take wait in
an outbox and are logged later (``outbox``, ``sync``, ``dssl tracking sync``).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from dssl.tracking import outbox
from dssl.tracking.inputs import input_md5s
from dssl.tracking.lineage import engine, git_state, hardware, params_hash
from dssl.tracking.mlflow_store import bounded_retries, init_store, project_root, store_problem, tracking_uri
from dssl.tracking.names import run_name
from dssl.tracking.outbox import TrackingUnavailable

__all__ = ["StageRecord", "TrackingUnavailable", "check_store", "log_stage", "log_stages", "init_store",
           "project_root", "stage_runs", "sync", "tracking_uri"]


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
    ``run`` suffix (``seed-1``, ``seed-1/digits-linear_probe``) in the run name (``names.run_name``) and
    its ``seed`` tag.
    """

    stage: str
    params: dict
    metrics: dict[str, float] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)
    inputs: list[Path] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    run: str = ""
    seed: int | None = None
    # What this run resolved from the params it read (an evaluation's per-dataset config): logged as
    # params under "run.", outside params_hash, which stays the hash of the params the stage read.
    run_params: dict = field(default_factory=dict)
    # Metrics with one value per step (a pretraining run's per-round timings), logged at steps 1, 2, ...:
    # what varies from run to run stays out of the stage's outputs (DVC would see every rerun as a change).
    steps: dict[str, list[float]] = field(default_factory=dict)

    @property
    def run_name(self) -> str:
        return run_name(self.stage, self.run)


def _run_tags(record: StageRecord, profile: str, root: Path, common: dict[str, str]) -> dict[str, str]:
    inputs = input_md5s(root, record.inputs)
    tags = {
        "stage": record.stage,
        "profile": profile,
        "params_hash": params_hash(record.params),
        **common,
        **{f"input.{path}": md5 for path, (md5, _) in inputs.items()},
        **{f"input_source.{path}": source for path, (_, source) in inputs.items()},
        **record.tags,
    }
    if record.seed is not None:
        tags["seed"] = str(record.seed)
    # mlflow.source.git.commit is what the MLflow UI shows as the version of a run.
    tags["mlflow.source.git.commit"] = tags["git_commit"]
    return tags


def run_payload(record: StageRecord, profile: str, root: Path, common: dict[str, str]) -> dict:
    """Everything one MLflow run carries, as plain values: what a deferred run keeps in the outbox."""
    flat: dict[str, str] = {}
    _flatten("", record.params, flat)
    if record.run_params:
        _flatten("run", record.run_params, flat)
    return {"profile": profile, "run_name": record.run_name, "start_time": int(time.time() * 1000),
            "tags": _run_tags(record, profile, root, common), "params": flat,
            "metrics": {k: float(v) for k, v in record.metrics.items()},
            "steps": {k: [float(v) for v in values] for k, values in record.steps.items()},
            "artifacts": [str(root / artifact) for artifact in record.artifacts]}


def send(client, experiment_id: str, payload: dict) -> str:
    """Log one run from its payload (one batch call per 100 entries); returns the run id."""
    from mlflow.entities import Metric, Param, RunTag

    run = client.create_run(experiment_id, run_name=payload["run_name"], start_time=payload["start_time"])
    now = payload["start_time"]
    metrics = [Metric(metric_name(k), v, now, 0) for k, v in payload["metrics"].items()]
    metrics += [Metric(metric_name(k), v, now, step) for k, values in payload.get("steps", {}).items()
                for step, v in enumerate(values, 1)]
    params = [Param(metric_name(k), v) for k, v in payload["params"].items()]
    run_tags = [RunTag(k, v) for k, v in payload["tags"].items()]
    # MLflow caps one batch at 1000 metrics, 100 params and 100 tags.
    for start in range(0, max(len(metrics), len(params), len(run_tags)), BATCH):
        client.log_batch(run.info.run_id, metrics=metrics[start:start + BATCH],
                         params=params[start:start + BATCH], tags=run_tags[start:start + BATCH])
    for artifact in payload["artifacts"]:
        client.log_artifact(run.info.run_id, artifact)
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def log_stages(records: list[StageRecord], profile: str, root: Path | None = None) -> list[str]:
    """Log finished stage runs to the project's MLflow store; returns run ids.

    A stage calls it once its outputs are written, and no output holds a run id (a run is found by its
    stage and run name, ``names``), so nothing is rewritten after logging. Every run logged is remembered
    by the result it describes (stage, run name, params, inputs and code: ``outbox.run_key``), so a run
    identical to one logged before, here, by ``dssl tracking sync`` or by a stage killed after logging,
    is not logged again: its id is returned. Requests retry a bounded time
    (``mlflow_store.bounded_retries``). When the store cannot be reached, the runs not yet logged wait in
    the outbox and ``TrackingUnavailable`` is raised, holding the ids of the runs that were logged.
    """
    root = root or project_root()
    common = {**git_state(root), **engine(), **hardware()}
    payloads = [run_payload(record, profile, root, common) for record in records]
    run_ids: list[str | None] = [outbox.logged_id(root, payload) for payload in payloads]
    try:
        with bounded_retries():
            if not all(run_ids):
                client, experiment_id = _client(root, profile)
            for index, payload in enumerate(payloads):
                if run_ids[index] is None:
                    run_ids[index] = send(client, experiment_id, payload)
                    # remembered by the result it describes: a rerun after a failure that follows (the
                    # result files' write) finds it and logs it no second time
                    outbox.remember(root, payload, run_ids[index])
                    outbox.forget(root, payload)   # it may have waited from an earlier run of the stage
    except Exception as error:  # noqa: BLE001 - filtered by is_unreachable
        if not outbox.is_unreachable(error):
            raise
        for index, payload in enumerate(payloads):
            if run_ids[index] is None:
                outbox.defer(root, payload)
            else:
                outbox.remember(root, payload, run_ids[index])
        waiting = sum(run_id is None for run_id in run_ids)
        raise outbox.TrackingUnavailable(
            f"the tracking store {tracking_uri(root)} cannot be reached ({type(error).__name__}: "
            f"{str(error).splitlines()[0][:300]}); the results are written, and {waiting} of {len(run_ids)} "
            f"runs wait in {root / outbox.OUTBOX_DIR}: log them with `dssl tracking sync` once the store is "
            "back, or run this command again", run_ids) from error
    return run_ids


def check_store(root: Path) -> None:
    """Stop before any work when the tracking server does not answer (``TrackingUnavailable``, exit 69),
    rather than train and then wait on it: a check of seconds (``mlflow_store.store_problem``)."""
    problem = store_problem(root)
    if problem is not None:
        raise TrackingUnavailable(
            f"the tracking store {tracking_uri(root)} does not answer ({problem}); nothing was run: start it "
            "(`dssl tracking serve`) or set MLFLOW_TRACKING_URI to one that runs (unset: the project's own "
            "SQLite store), then run this command again", [])


def _client(root: Path, profile: str):
    import mlflow

    experiment_id = init_store(root, profile)
    return mlflow.MlflowClient(tracking_uri=tracking_uri(root)), experiment_id


def sync(root: Path) -> tuple[int, list[str]]:
    """Log every run waiting in the outbox; returns how many were logged and the problems left. No file
    but the outbox's own is written: the stages' outputs hold no run id (``names``)."""
    logged, problems = 0, []
    for path in outbox.pending(root):
        payload = json.loads(path.read_text())
        try:
            with bounded_retries():
                client, experiment_id = _client(root, payload["profile"])
                run_id = outbox.logged_id(root, payload) or send(client, experiment_id, payload)
        except Exception as error:  # noqa: BLE001 - reported, the entry stays
            if not outbox.is_unreachable(error):
                raise
            problems.append(f"{payload['run_name']}: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
            break   # the store is still away: the rest would fail the same way
        outbox.remember(root, payload, run_id)
        outbox.forget(root, payload)
        logged += 1
    return logged, problems


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

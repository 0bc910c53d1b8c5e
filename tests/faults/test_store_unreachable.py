"""A tracking server that does not answer stops a stage within seconds, before it trains: one line naming
the store's URI and what to do, exit 69, nothing written; MLflow's requests retry a bounded time."""

from __future__ import annotations

import os
import time
from pathlib import Path

import fault_helpers as faults
import pytest

from dssl.cli import EXIT_TRACKING_UNAVAILABLE, main
from dssl.tracking import mlflow_store, outbox


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return faults.prepared_project(tmp_path_factory.mktemp("prepared"))


def _stopped_before_training(root: Path, uri: str, capsys) -> None:
    capsys.readouterr()
    began = time.monotonic()
    assert main(["pretrain_fl", "simsiam-cnn", "fl-iid", "fedavg"]) == EXIT_TRACKING_UNAVAILABLE
    assert time.monotonic() - began < mlflow_store.CHECK_TIMEOUT_S + 10
    lines = faults.error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith(f"error: the tracking store {uri} does not answer"), lines
    assert "dssl tracking serve" in lines[0] and "run this command again" in lines[0]
    assert not (root / "models").exists() and not (root / "checkpoints").exists()
    assert not outbox.pending(root) and not faults.temporaries(root)


def test_a_server_that_never_answers_stops_the_stage_within_seconds(prepared: Path, tmp_path: Path, monkeypatch,
                                                                     capsys) -> None:
    root = faults.copy_of(prepared, tmp_path / "project", monkeypatch)
    with faults.silent_port() as port:
        uri = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        _stopped_before_training(root, uri, capsys)


def test_a_closed_port_stops_the_stage_at_once_and_the_stage_runs_once_the_store_is_back(
        prepared: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    root = faults.copy_of(prepared, tmp_path / "project", monkeypatch)
    uri = f"http://127.0.0.1:{faults.closed_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    _stopped_before_training(root, uri, capsys)
    monkeypatch.delenv("MLFLOW_TRACKING_URI")   # the project's own store
    assert main(["pretrain_fl", "simsiam-cnn", "fl-iid", "fedavg"]) == 0
    assert (root / "models/fl/simsiam-cnn/fl-iid/fedavg/seed-0/model.pt").is_file()


def test_requests_retry_a_bounded_time_and_leave_the_environment_as_it_was(monkeypatch) -> None:
    for key in mlflow_store.RETRY_DEFAULTS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "3")   # one the user set wins
    with mlflow_store.bounded_retries():
        assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2"
        assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "3"
        retries = int(os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"])
        factor = float(os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"])
        # at most ~40 s per request in all, not MLflow's ~4.5 minutes
        assert sum(factor * 2 ** i for i in range(retries)) + (retries + 1) * 10 <= 40
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ and os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "3"


def test_the_projects_own_store_needs_no_check(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert mlflow_store.store_problem(tmp_path) is None

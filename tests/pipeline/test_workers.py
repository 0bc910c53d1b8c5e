"""How many processes a stage starts: seeds side by side, or each round's clients at once."""

from __future__ import annotations

import pytest

from dssl.pipeline.workers import client_worker_count, worker_count


def test_client_workers_default_to_one_and_seeds_then_run_side_by_side(monkeypatch):
    monkeypatch.delenv("DSSL_CLIENT_WORKERS", raising=False)
    monkeypatch.delenv("DSSL_ENGINE", raising=False)
    monkeypatch.setenv("DSSL_DEVICE", "cpu")
    monkeypatch.setenv("DSSL_WORKERS", "3")
    assert client_worker_count() == 1 and worker_count(5) == 3


def test_client_workers_run_the_seeds_one_after_another(monkeypatch):
    monkeypatch.setenv("DSSL_CLIENT_WORKERS", "4")
    monkeypatch.setenv("DSSL_WORKERS", "3")
    assert client_worker_count() == 4 and worker_count(5) == 1


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_a_bad_client_worker_count_is_refused_with_the_variable_named(monkeypatch, value):
    monkeypatch.setenv("DSSL_CLIENT_WORKERS", value)
    with pytest.raises(ValueError, match=f"DSSL_CLIENT_WORKERS must be an integer >= 1, got '{value}'"):
        worker_count(3)


def test_client_state_storage_comes_from_the_environment(monkeypatch):
    from dssl.federation.client_states import STORAGES
    from dssl.pipeline.workers import CLIENT_STATE_STORAGES, client_state_storage

    assert CLIENT_STATE_STORAGES == STORAGES
    monkeypatch.delenv("DSSL_CLIENT_STATES", raising=False)
    assert client_state_storage() == "host"
    monkeypatch.setenv("DSSL_CLIENT_STATES", "disk")
    assert client_state_storage() == "disk"
    monkeypatch.setenv("DSSL_CLIENT_STATES", "gpu")
    with pytest.raises(ValueError, match="DSSL_CLIENT_STATES must be one of host, disk, got 'gpu'"):
        client_state_storage()

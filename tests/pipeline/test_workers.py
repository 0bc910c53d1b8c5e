"""How many processes a stage starts: seeds side by side, or each round's clients at once."""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.parametrize("device, expected", [(None, 3), ("cpu", 3), ("cuda", 1), ("cuda:1", 1)])
def test_an_accelerator_runs_one_task_at_a_time_named_or_as_a_device(monkeypatch, device, expected):
    import torch

    monkeypatch.delenv("DSSL_WORKERS", raising=False)
    monkeypatch.delenv("DSSL_ENGINE", raising=False)
    monkeypatch.delenv("DSSL_CLIENT_WORKERS", raising=False)
    monkeypatch.setattr("dssl.pipeline.workers.available_cores", lambda: 2)
    assert worker_count(3, device) == expected
    if device is not None:
        assert worker_count(3, torch.device(device)) == expected   # the stages pass either form


@pytest.mark.parametrize("tasks, cores, expected", [(10, 2, 2), (50, 2, 2), (4, 2, 2), (5, 2, 2), (3, 2, 3),
                                                    (2, 2, 2), (1, 2, 1), (7, 4, 7), (8, 4, 4), (9, 4, 4)])
def test_one_worker_per_core_unless_a_short_remainder_would_leave_a_core_idle(tasks, cores, expected):
    from dssl.pipeline.workers import pool_size

    assert pool_size(tasks, cores) == expected


def test_a_stage_on_the_cpu_starts_one_worker_per_core_for_many_tasks(monkeypatch):
    monkeypatch.delenv("DSSL_WORKERS", raising=False)
    monkeypatch.delenv("DSSL_ENGINE", raising=False)
    monkeypatch.delenv("DSSL_CLIENT_WORKERS", raising=False)
    monkeypatch.setattr("dssl.pipeline.workers.available_cores", lambda: 2)
    assert [worker_count(n, "cpu") for n in (1, 2, 3, 10, 50)] == [1, 2, 3, 2, 2]


def test_a_failing_task_ends_the_stage_and_its_workers():
    """With the stop-request handlers installed (as every `dssl <kind>` does), a task that fails ends the
    stage while other workers are busy: workers inherit the handlers, so ending them with SIGTERM
    (multiprocessing.Pool.terminate) could leave one waiting for a task forever."""
    import subprocess
    import sys

    script = (
        "import os\n"
        "from dssl.training import preemption\n"
        "from dssl.pipeline.workers import run_tasks\n"
        "from workers_helper import fails_on_one\n"
        "preemption.install()\n"
        "os.environ['DSSL_WORKERS'] = '2'\n"
        "try:\n"
        "    run_tasks(fails_on_one, [0, 1, 2, 3, 4, 5])\n"
        "except ValueError as err:\n"
        "    print('raised:', err)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "raised: task 1 failed" in done.stdout

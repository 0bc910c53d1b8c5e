"""`dssl lineage` on a copy of the session's `dssl repro` run of the CI profile (``ci_runs.ci_dvc_run``): a
damaged tracking store still gives the dvc.lock part of the answer, and the command exits 2 with one line
about the store; a workspace that differs from dvc.lock is printed and exits 2 with one line; a pipeline
folder recorded with a params file of another profile is refused."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from ci_runs import clean_env, copy_run

pytestmark = pytest.mark.slow

RESULT = "reports/metrics/fl/simsiam-cnn/fl-label/fedavg/seed-1/digits-finetune.json"
PARTITION = "data/partitions/fl-label/partition.json"


@pytest.fixture
def project(ci_dvc_run, tmp_path) -> Path:
    return copy_run(ci_dvc_run, tmp_path / "ci")


def lineage(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["dssl", "lineage", *args], cwd=project, env=clean_env(), capture_output=True, text=True,
                          timeout=600)


def test_a_damaged_tracking_store_leaves_the_lock_part_and_one_line(project: Path) -> None:
    store = project / "mlflow.db"
    damaged = b"not a database, " * 4096
    store.write_bytes(damaged)
    answer = lineage(project, RESULT)
    err = answer.stderr.strip()
    assert answer.returncode == 2 and "\n" not in err and "Traceback" not in err, err
    assert f"tracking store sqlite:///{store.resolve()} unreadable" in err and "the dvc.lock part holds" in err
    assert "-- pretraining stage pretrain_fl@simsiam-cnn-fl-label-fedavg" in answer.stdout
    assert "every path and params value above matches dvc.lock" in answer.stdout
    assert store.read_bytes() == damaged


def test_a_workspace_that_differs_from_dvc_lock_exits_2(project: Path) -> None:
    path = project / PARTITION
    path.write_bytes(path.read_bytes().replace(b"\n", b" \n", 1))
    answer = lineage(project, RESULT)
    err = answer.stderr.strip()
    assert answer.returncode == 2 and "\n" not in err, err
    assert "the workspace does not match dvc.lock in" in err and "data/partitions/fl-label changed" in err, err
    assert "(`dvc status` in . lists what changed)" in err
    assert "workspace does NOT match dvc.lock" in answer.stdout


def test_a_folder_whose_params_file_names_another_profile_is_refused(project: Path) -> None:
    params = project / "params.yaml"
    params.write_text(re.sub(r"(?m)^profile: .*$", "profile: elsewhere", params.read_text()))
    (project / "params.yaml").rename(project / "ci.yaml")
    for lock in [project / "dvc.lock", *project.glob("pipelines/**/dvc.lock")]:
        lock.write_text(lock.read_text().replace("params.yaml:", "ci.yaml:"))
    answer = lineage(project, RESULT)
    err = answer.stderr.strip()
    assert answer.returncode == 2 and "\n" not in err, err
    assert "its dvc.lock files were recorded with ci.yaml, whose pipeline folder is runs/elsewhere/" in err

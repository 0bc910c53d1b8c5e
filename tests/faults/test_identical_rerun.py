"""Outputs are functions of their inputs: a stage run again on the same inputs writes the same bytes.

What DVC tracks as a stage's output holds no timing, PID, run id or resume count (those go to the stage's
MLflow runs), so re-running a finished stage (`dvc repro -f -s`) changes no output hash and leaves every
stage downstream up to date. Each pretraining kind (its history.json included) and the stages that read
pretrained weights or write the data's splits are run twice here, their outputs compared byte for byte.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from conftest import copy_project

from dssl.cli import main
from dssl.config.params import read_params
from dssl.pipeline.catalogue import instances
from dssl.tracking import stage_runs

pytestmark = pytest.mark.slow

# In the order they run: each stage's inputs are outputs of the ones before it.
STAGES = ("partitions", "graphs", "pretrain_fl@simsiam-cnn-fl-label-fedavg",
          "pretrain_decl@mae-vit-uniform-3-decl-uniform", "pretrain_central@simsiam-cnn",
          "pretrain_local@simsiam-cnn-fl-label",
          "weight_distance@simsiam-cnn-fl-label-fedavg", "features@simsiam-cnn-fl-label-fedavg")


def outputs(root: Path, stage) -> dict[str, bytes]:
    """Every file of a stage's outputs, by path, with its bytes."""
    files = {}
    for output in stage.outputs:
        path = root / output
        for file in ([path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())):
            files[str(file.relative_to(root))] = file.read_bytes()
    assert files, f"{stage.name} wrote nothing"
    return files


def run_stage(stage) -> None:
    assert main(shlex.split(stage.command())[1:]) == 0, stage.name


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The CI project with every stage of ``STAGES`` run once; yields the project, its stages by name and
    each stage's outputs as that first run wrote them."""
    root = copy_project(tmp_path_factory.mktemp("rerun"), "configs/ci.yaml")
    stages = {stage.name: stage for stage in instances(read_params(root / "params.yaml"))}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.setenv("DSSL_WARM", "0")
        patch.setenv("DSSL_WORKERS", "1")
        patch.setenv("DSSL_CLIENT_WORKERS", "1")
        for name in ("DVC_ROOT", "DVC_STAGE", "MLFLOW_TRACKING_URI"):
            patch.delenv(name, raising=False)
        assert main(["prepare", "digits"]) == 0
        first = {}
        for name in STAGES:
            run_stage(stages[name])
            first[name] = outputs(root, stages[name])
        yield root, stages, first


@pytest.mark.parametrize("name", STAGES)
def test_a_stage_run_again_on_the_same_inputs_writes_the_same_bytes(finished, name: str) -> None:
    root, stages, first = finished
    run_stage(stages[name])
    again = outputs(root, stages[name])
    assert again.keys() == first[name].keys()
    changed = [path for path in again if again[path] != first[name][path]]
    assert not changed, f"{name}: a rerun on the same inputs changed {changed}"


def test_the_timings_and_resume_counts_are_in_the_pretraining_runs(finished) -> None:
    """What history.json no longer holds is logged with each seed's run: the summary, and per round."""
    import mlflow

    from dssl.tracking import tracking_uri

    root, _, _ = finished
    runs = stage_runs(root, "ci")
    runs = runs[runs["stage"] == "pretrain_fl@simsiam-cnn-fl-label-fedavg"]
    assert len(runs) >= 2 and (runs["metrics.resumed_rounds"] == 0).all() and (runs["metrics.train_seconds"] > 0).all()
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(root))
    rounds = read_params(root / "params.yaml")["pretrain"]["fl"]["train"]["rounds"]
    for run_id in runs["run_id"]:
        history = client.get_metric_history(run_id, "round.wall_time_s")
        assert sorted(m.step for m in history) == list(range(1, rounds + 1)) and all(m.value > 0 for m in history)

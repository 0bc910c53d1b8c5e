"""A stage asked for a GPU that finds none stops before it trains, with one message naming the params
key; an evaluation stage whose tracking store cannot be reached keeps its results, and its runs are
logged later by `dssl tracking sync` or by the same command run again, never twice, without a byte of the
results (DVC's outputs) changed: a run is found by its stage and its name, a function of the result."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from conftest import copy_project

from dssl.cli import EXIT_BAD_INPUT, EXIT_TRACKING_UNAVAILABLE, main
from dssl.tracking import outbox, stage_runs
from dssl.tracking.names import result_run_name

UNREACHABLE = "http://127.0.0.1:9"   # the discard port: nothing answers


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """The CI project with its digits prepared (and its tracking store created), once for the module."""
    root = copy_project(tmp_path_factory.mktemp("prepared"), "configs/ci.yaml")
    with pytest.MonkeyPatch.context() as patch:
        _environment(patch, root)
        assert main(["prepare", "digits"]) == 0
    return root


def _environment(patch, root: Path) -> None:
    patch.chdir(root)
    patch.setenv("DSSL_WARM", "0")
    patch.setenv("DSSL_WORKERS", "1")
    patch.delenv("DVC_ROOT", raising=False)
    patch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture
def ci_project(prepared: Path, tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "project"
    shutil.copytree(prepared, root)
    _environment(monkeypatch, root)
    return root


def _edit(root: Path, change) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    change(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is there")
def test_a_pretraining_stage_asked_for_cuda_stops_before_training(ci_project: Path, capsys) -> None:
    _edit(ci_project, lambda p: p["pretrain"]["fl"]["train"].update(device="cuda"))
    capsys.readouterr()
    # the partition is not even there
    assert main(["pretrain_fl", "simsiam-cnn", "fl-iid", "fedavg"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: pretrain.fl.train.device is 'cuda' but torch finds no GPU")
    assert "set pretrain.fl.train.device: auto" in err and "Traceback" not in err
    assert not (ci_project / "models").exists() and not (ci_project / "checkpoints").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is there")
def test_an_evaluation_stage_asked_for_cuda_stops_before_training(ci_project: Path, capsys) -> None:
    _edit(ci_project, lambda p: p["evaluate"]["linear_probe"].update(device="cuda"))
    capsys.readouterr()
    assert main(["evaluate_random", "cnn_small"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "evaluate.linear_probe.device (digits) is 'cuda' but torch finds no GPU" in err
    assert not (ci_project / "reports/metrics").exists() and not (ci_project / "checkpoints").exists()


def _evaluation_runs(root: Path):
    runs = stage_runs(root, "ci")
    return runs[runs["stage"] == "evaluate_random@cnn_small"]


def _results(root: Path) -> dict[str, bytes]:
    folder = root / "reports/metrics/random"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.json"))}


def _run_names(results: dict[str, bytes]) -> list[str]:
    return sorted(result_run_name(json.loads(data)) for data in results.values())


def _outage(monkeypatch) -> None:
    """The tracking server answers the stage's check, then goes away."""
    monkeypatch.setattr("dssl.pipeline.common.check_store", lambda root: None)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", UNREACHABLE)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")


def test_results_outlive_an_unreachable_tracking_store(ci_project: Path, monkeypatch, capsys) -> None:
    _outage(monkeypatch)
    assert main(["evaluate_random", "cnn_small"]) == EXIT_TRACKING_UNAVAILABLE
    err = capsys.readouterr().err
    assert f"the tracking store {UNREACHABLE} cannot be reached" in err and "dssl tracking sync" in err
    written = _results(ci_project)
    # seeds 0, 1 and 2: the random-init CNN runs every seed of its backbone's cells (a stand-alone grid has 2)
    assert len(written) == 3 and not any(b"mlflow_run_id" in data for data in written.values())
    assert len(outbox.pending(ci_project)) == 3
    assert main(["tracking", "sync"]) == EXIT_TRACKING_UNAVAILABLE   # still away: nothing lost
    assert len(outbox.pending(ci_project)) == 3

    monkeypatch.delenv("MLFLOW_TRACKING_URI")   # the store is back (the project's SQLite file)
    assert main(["tracking", "sync"]) == 0
    assert _results(ci_project) == written   # byte for byte: the sync writes no output
    assert sorted(_evaluation_runs(ci_project)["run_name"]) == _run_names(written)
    assert not outbox.pending(ci_project)

    # the stage run again (as DVC would, the stage having failed) trains nothing and logs nothing new
    assert main(["evaluate_random", "cnn_small"]) == 0
    assert _results(ci_project) == written and len(_evaluation_runs(ci_project)) == 3


def test_the_same_command_run_again_logs_what_waits(ci_project: Path, monkeypatch) -> None:
    _outage(monkeypatch)
    assert main(["evaluate_random", "cnn_small"]) == EXIT_TRACKING_UNAVAILABLE
    written = _results(ci_project)
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert main(["evaluate_random", "cnn_small"]) == 0
    assert _results(ci_project) == written
    runs = _evaluation_runs(ci_project)
    assert len(runs) == 3 and sorted(runs["run_name"]) == _run_names(written)
    assert set(runs["tags.resumed"]) == {"result"}   # nothing trained the second time
    assert not outbox.pending(ci_project)             # and `dssl tracking sync` would log nothing twice
    assert not (ci_project / "checkpoints/evaluate_random@cnn_small").exists()   # nothing left to resume


def _dvc(root: Path, *args: str) -> str:
    done = subprocess.run([str(Path(sys.executable).parent / "dvc"), *args], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_sync_after_an_outage_rewrites_no_output_and_lineage_names_the_runs(ci_project: Path, monkeypatch,
                                                                              capsys) -> None:
    """The results DVC recorded after the outage (`dvc commit`: the stage failed, so `dvc repro` recorded
    nothing) stay byte for byte what they were through `dssl tracking sync`, `dvc status` stays clean, and
    `dssl lineage` finds each result's run by its stage and name."""
    assert main(["code"]) == 0   # the manifests the evaluation stage depends on, for dvc commit
    _outage(monkeypatch)
    assert main(["evaluate_random", "cnn_small"]) == EXIT_TRACKING_UNAVAILABLE
    written = _results(ci_project)
    stage = "pipelines/evaluate_random/cnn_small/dvc.yaml:evaluate_random@cnn_small"
    _dvc(ci_project, "commit", "-f", stage)
    monkeypatch.delenv("MLFLOW_TRACKING_URI")   # the store is back
    assert main(["tracking", "sync"]) == 0 and not outbox.pending(ci_project)
    assert _results(ci_project) == written
    assert "up to date" in _dvc(ci_project, "status", stage)
    runs = _evaluation_runs(ci_project).set_index("run_name")
    capsys.readouterr()
    for file, data in written.items():
        name = result_run_name(json.loads(data))
        assert main(["lineage", f"reports/metrics/random/{file}"]) == 0
        shown = capsys.readouterr().out
        assert f"MLflow run named {name}" in shown
        assert (f"MLflow run {runs.loc[name, 'run_id']} ({name}; matched by stage and run name, and the result "
                "file's md5)") in shown


def test_step_options_of_a_train_section_reach_the_training_step_and_the_records(ci_project: Path, monkeypatch) -> None:
    from dssl.training import step

    _edit(ci_project, lambda p: (p.update(seeds=[0]), p["pretrain"]["fl"]["train"].update(
        device="cpu", precision="bf16", channels_last=True)))
    assert main(["partitions"]) == 0
    built = []
    original = step.TrainStep.__init__

    def recording(self, model, optimizer, options=step.StepOptions()):
        built.append(options)
        original(self, model, optimizer, options)

    monkeypatch.setattr(step.TrainStep, "__init__", recording)
    assert main(["pretrain_fl", "simsiam-cnn", "fl-iid", "fedavg"]) == 0
    assert built == [step.StepOptions(precision="bf16", channels_last=True)]
    history = json.loads((ci_project / "models/fl/simsiam-cnn/fl-iid/fedavg/seed-0/history.json").read_text())
    assert history["device"] == "cpu" and history["params"]["pretrain"]["fl"]["train"]["precision"] == "bf16"
    runs = stage_runs(ci_project, "ci")
    run = runs[runs["stage"] == "pretrain_fl@simsiam-cnn-fl-iid-fedavg"].iloc[0]
    assert run["params.pretrain.fl.train.precision"] == "bf16" and run["params.pretrain.fl.train.device"] == "cpu"

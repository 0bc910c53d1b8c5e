"""A full disk, injected for real (a small tmpfs): every writer ends in one line naming the file and saying
to free space, exit 2, no temporary file left; run again once there is room, the stage ends with the same
bits as a run that never failed, and each run is logged once (after the results are written, never before)."""

from __future__ import annotations

import json
from pathlib import Path

import fault_helpers as faults
import pytest
import torch

from dssl.artifacts import WriteError
from dssl.cli import EXIT_BAD_INPUT, main
from dssl.evaluation.progress import Checkpoint
from dssl.federation.checkpoint import save_checkpoint
from dssl.pipeline.common import atomic_dir
from dssl.tracking import outbox, stage_runs
from dssl.tracking.names import result_run_name

BIG = {"weights": torch.zeros(256 * 1024)}   # 1 MiB: more than the small file systems below hold


def _assert_full(error: WriteError, path: Path) -> None:
    assert error.path == path and "no space left on the device" in str(error)
    assert "Free space on the file system" in str(error) and "\n" not in str(error)


def test_a_checkpoint_that_does_not_fit_leaves_the_previous_one_whole(tmp_path: Path) -> None:
    with faults.tmpfs(tmp_path / "disk", "64k") as disk:
        small = {"fingerprint": "f", "completed_rounds": 1, "schedule": [], "client_files": [], "strategy": {},
                 "rng": {}, "metrics": [], "global_states": [{"w": torch.ones(4)}]}
        path = save_checkpoint(disk / "run", small)
        before = path.read_bytes()
        with pytest.raises(WriteError) as caught:
            save_checkpoint(disk / "run", {**small, "global_states": [BIG]})
        _assert_full(caught.value, path)
        assert path.read_bytes() == before and not faults.temporaries(disk)
        evaluation = Checkpoint(disk / "task", "fingerprint", 0.0)
        with pytest.raises(WriteError) as caught:
            evaluation.save({"state": BIG})
        _assert_full(caught.value, evaluation.path)
        assert not faults.temporaries(disk) and not evaluation.path.exists()
        with pytest.raises(WriteError) as caught:
            outbox.write_json(disk / "result.json", {"values": "x" * 200_000})
        _assert_full(caught.value, disk / "result.json")
        assert not faults.temporaries(disk)


def test_a_model_save_that_does_not_fit_names_the_output_not_its_temporary(tmp_path: Path) -> None:
    with faults.tmpfs(tmp_path / "disk", "64k") as disk:
        with pytest.raises(WriteError) as caught, atomic_dir(disk / "model") as tmp:
            (tmp / "seed-0").mkdir()
            torch.save(BIG, tmp / "seed-0" / "model.pt")   # torch's own writer: a RuntimeError without errno
        _assert_full(caught.value, disk / "model")
        assert not faults.temporaries(disk) and not (disk / "model").exists()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return faults.prepared_project(tmp_path_factory.mktemp("prepared"))


def _results(root: Path) -> dict[str, dict]:
    folder = root / "reports/metrics/random"
    return {str(p.relative_to(folder)): json.loads(p.read_text()) for p in sorted(folder.rglob("*.json"))}


def _one_line(capsys, path_part: str) -> str:
    lines = faults.error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith("error: ") and path_part in lines[0], lines
    assert "no space left on the device" in lines[0] and "Traceback" not in lines[0]
    return lines[0]


@pytest.mark.slow
def test_an_evaluation_whose_results_do_not_fit_logs_its_runs_once(prepared: Path, tmp_path: Path, monkeypatch,
                                                                   capsys) -> None:
    reference = faults.copy_of(prepared, tmp_path / "reference", monkeypatch)
    assert main(["evaluate_random", "cnn_small"]) == 0
    expected = _results(reference)
    root = faults.copy_of(prepared, tmp_path / "project", monkeypatch)
    with faults.tmpfs(root / "reports/metrics", "4k"):   # one page: the first result file fits, no other
        capsys.readouterr()
        assert main(["evaluate_random", "cnn_small"]) == EXIT_BAD_INPUT
        _one_line(capsys, "reports/metrics/random/cnn_small/seed-")
        assert not faults.temporaries(root) and not (root / "reports/metrics/random/cnn_small").exists()
        runs = stage_runs(root, "ci")
        assert "stage" not in runs or not (runs["stage"] == "evaluate_random@cnn_small").any()   # results first
    assert main(["evaluate_random", "cnn_small"]) == 0   # room again: nothing trains, each run logged once
    assert _results(root) == expected
    runs = stage_runs(root, "ci")
    runs = runs[runs["stage"] == "evaluate_random@cnn_small"]
    names = sorted(result_run_name(r) for r in _results(root).values())
    assert sorted(runs["run_name"]) == names and len(names) == len(expected)


@pytest.mark.slow
def test_a_pretraining_whose_models_do_not_fit_resumes_to_the_same_bits(prepared: Path, tmp_path: Path, monkeypatch,
                                                                        capsys) -> None:
    stage = ["pretrain_fl", "simsiam-cnn", "fl-iid", "fedavg"]
    cell = "models/fl/simsiam-cnn/fl-iid/fedavg"
    reference = faults.copy_of(prepared, tmp_path / "reference", monkeypatch)
    assert main(stage) == 0
    root = faults.copy_of(prepared, tmp_path / "project", monkeypatch)
    with faults.tmpfs(root / "models", "256k"):   # a CNN's model.pt is ~0.6 MB
        capsys.readouterr()
        assert main(stage) == EXIT_BAD_INPUT
        _one_line(capsys, cell)
        assert not faults.temporaries(root) and not (root / cell).exists()
    assert (root / "checkpoints/pretrain_fl@simsiam-cnn-fl-iid-fedavg").is_dir()   # kept: the rerun resumes
    assert main(stage) == 0
    for name in ("seed-0/model.pt", "seed-1/model.pt", "seed-0/encoder.pt"):
        assert (root / cell / name).read_bytes() == (reference / cell / name).read_bytes()
    assert not faults.temporaries(root)

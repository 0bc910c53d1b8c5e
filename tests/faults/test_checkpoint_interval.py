"""params.yaml's ``checkpoint`` section: validated with a range, honoured by the stages (a checkpoint after
every N-th round), no input of any stage (changing it re-runs nothing), and a stage killed with SIGKILL
after its k-th checkpoint resumes from it and ends with the bits of a run never stopped."""

from __future__ import annotations

from pathlib import Path

import fault_helpers as faults
import pytest
import yaml

from dssl.cli import main
from dssl.config.params import read_params
from dssl.pipeline.dvcfile import render_files
from dssl.pipeline.validate import load_params_fully
from dssl.training.preemption import CheckpointInterval, checkpoint_interval

REPO = Path(__file__).resolve().parents[2]
STAGE = ["pretrain_fl", "simsiam-cnn", "fl-iid", "fedavg"]
CELL = "models/fl/simsiam-cnn/fl-iid/fedavg"
ROUNDS = 6


def test_out_of_range_values_name_their_key(tmp_path: Path, capsys) -> None:
    params = yaml.safe_load((REPO / "configs/ci.yaml").read_text())
    params["checkpoint"] = {"every_rounds": 0, "every_seconds": 90000, "every_epochs": 1}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "checkpoint.every_rounds: must be >= 1, got 0" in err
    assert "checkpoint.every_seconds: must be <= 86400, got 90000" in err
    assert "checkpoint.every_epochs: unknown key" in err and "Traceback" not in err


def test_every_profile_sets_an_interval_and_a_missing_one_has_the_old_default() -> None:
    for name in ("params.yaml", "configs/ci.yaml", "configs/paper.yaml", "configs/paper_b.yaml",
                 "configs/paper_b_cifar100.yaml"):
        assert "checkpoint" in read_params(REPO / name), name
    assert checkpoint_interval(read_params(REPO / "params.yaml")) == CheckpointInterval(1, 5.0)
    assert checkpoint_interval(read_params(REPO / "configs/paper.yaml")).every_seconds == 600
    assert checkpoint_interval({}) == CheckpointInterval(1, 60.0)
    load_params_fully(REPO / "params.yaml")


def test_the_interval_is_no_stage_input(tmp_path: Path) -> None:
    """Two params files that differ in the interval alone render the same dvc.yaml files: DVC sees no
    params change (``dvc status`` stays clean), so changing it re-runs nothing."""
    params = read_params(REPO / "params.yaml")
    other = {**params, "checkpoint": {"every_rounds": 7, "every_seconds": 1234}}
    params_file = (REPO / "params.yaml").resolve()
    assert render_files(params, REPO, params_file) == render_files(other, REPO, params_file)
    assert not any("checkpoint" in line for line in render_files(params, REPO, params_file)
                   if line.lstrip().startswith("- ") and "." in line and "/" not in line)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    root = faults.prepared_project(tmp_path_factory.mktemp("prepared"))
    faults.edit_params(root, lambda p: (p["pretrain"]["fl"]["train"].update(rounds=ROUNDS),
                                        p.update(checkpoint={"every_rounds": 2, "every_seconds": 0})))
    return root


def _count_writes(monkeypatch) -> list[int]:
    import dssl.federation.simulator as simulator

    written: list[int] = []
    original = simulator.save_checkpoint

    def counting(directory, payload):
        written.append(payload["completed_rounds"])
        return original(directory, payload)

    monkeypatch.setattr(simulator, "save_checkpoint", counting)
    return written


@pytest.mark.slow
def test_the_interval_is_honoured_and_a_kill_resumes_from_the_last_checkpoint(prepared: Path, tmp_path: Path,
                                                                              monkeypatch) -> None:
    reference = faults.copy_of(prepared, tmp_path / "reference", monkeypatch)
    written = _count_writes(monkeypatch)
    assert main(STAGE) == 0
    assert written == [2, 4, 6, 2, 4, 6]   # every 2nd round of each seed, the last one included

    root = faults.copy_of(prepared, tmp_path / "project", monkeypatch)
    faults.killed_after(root, STAGE, checkpoints=2)   # after round 4 of seed 0
    assert not (root / CELL).exists()

    import dssl.federation.simulator as simulator
    rounds: list[int] = []
    original_round = simulator.Simulator._timed_round
    monkeypatch.setattr(simulator.Simulator, "_timed_round",
                        lambda self, index: rounds.append(index + 1) or original_round(self, index))
    assert main(STAGE) == 0
    assert rounds == [5, 6, 1, 2, 3, 4, 5, 6]   # seed 0 from its checkpoint of round 4, seed 1 from the start
    for name in ("seed-0/model.pt", "seed-1/model.pt", "seed-0/encoder.pt", "seed-1/encoder.pt"):
        assert (root / CELL / name).read_bytes() == (reference / CELL / name).read_bytes()
    assert not faults.temporaries(root)

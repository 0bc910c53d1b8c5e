"""Checkpoints load with weights_only=True; a damaged one is an ArtifactError that says to delete it."""

from __future__ import annotations

from pathlib import Path

import fl_resume_helper as helper
import numpy as np
import pytest
import torch

from dssl.artifacts import ArtifactError
from dssl.federation.checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A DecL run's checkpoint (stacked states, RNG states, metrics) and its bytes."""
    directory = tmp_path_factory.mktemp("ckpt")
    helper.run("decl", directory)
    return directory, (directory / CHECKPOINT_NAME).read_bytes()


def fresh_copy(finished: tuple[Path, bytes], tmp_path: Path, data: bytes | None = None) -> Path:
    (tmp_path / CHECKPOINT_NAME).write_bytes(finished[1] if data is None else data)
    return tmp_path


def test_checkpoint_holds_only_tensors_and_plain_values(finished) -> None:
    payload = torch.load(finished[0] / CHECKPOINT_NAME, weights_only=True)
    assert payload["completed_rounds"] == helper.ROUNDS
    assert payload["rng"]["cpu"].dtype == torch.uint8
    assert set(payload["client_states"]) == {"floats", "counts"}


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_damaged_checkpoint_is_an_artifact_error_and_is_left_alone(finished, tmp_path: Path, damage: str) -> None:
    data = finished[1][: len(finished[1]) // 2] if damage == "truncated" else b"\x00not a checkpoint"
    directory = fresh_copy(finished, tmp_path, data)
    path = directory / CHECKPOINT_NAME
    simulator = helper.build("decl", directory, on_mismatch="restart")
    with pytest.raises(ArtifactError) as err:
        simulator.run()
    message = str(err.value)
    assert message.startswith(f"{path}: ") and "cannot be loaded as a torch file" in message
    assert f"delete it (`rm {path}`) to restart the run" in message and "dvc checkout" not in message
    assert path.read_bytes() == data  # nothing written over it
    assert sorted(p.name for p in directory.iterdir()) == [CHECKPOINT_NAME]


def test_checkpoint_missing_an_entry(finished, tmp_path: Path) -> None:
    directory = fresh_copy(finished, tmp_path)
    payload = torch.load(directory / CHECKPOINT_NAME, weights_only=True)
    del payload["metrics"]
    torch.save(payload, directory / CHECKPOINT_NAME)
    with pytest.raises(ArtifactError, match="missing entry 'metrics'.*delete it"):
        load_checkpoint(directory, payload["fingerprint"])


def test_saving_a_value_weights_only_cannot_load_fails_before_writing(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"payload\['metrics'\]\[0\]\['loss'\]: numpy.float64"):
        save_checkpoint(tmp_path, {"metrics": [{"loss": np.float64(0.5)}], "rng": {"cpu": torch.get_rng_state()}})
    with pytest.raises(TypeError, match=r"payload\['extra'\]: numpy.ndarray"):
        save_checkpoint(tmp_path, {"extra": np.zeros(2)})
    assert not list(tmp_path.iterdir())

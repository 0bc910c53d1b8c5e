"""Central and stand-alone pretraining (one round of all their epochs) checkpoint inside that round, after
every ``checkpoint.every_rounds``-th epoch: a stage killed with SIGKILL after its k-th epoch checkpoint
resumes from that epoch and ends with the bits of a run never stopped (weights and history.json)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import fault_helpers as faults
import numpy as np
import pytest
import torch

from dssl.cli import main
from dssl.training import preemption
from dssl.training.preemption import CheckpointInterval

CENTRAL = ["pretrain_central", "simsiam-cnn"]
CENTRAL_CELL = "models/central/simsiam-cnn"
LOCAL = ["pretrain_local", "simsiam-cnn", "fl-label"]
LOCAL_CELL = "models/local/simsiam-cnn/fl-label"
EPOCHS = 5


@pytest.fixture
def handlers():
    previous = {signum: signal.getsignal(signum) for signum in preemption.SIGNALS}
    preemption.reset()
    yield
    preemption.reset()
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _alone(folder: Path, signal_after_steps: int | None = None,
           interval: CheckpointInterval = CheckpointInterval(1, 0)):
    """Four epochs of a tiny SimSiam on 24 images trained alone (``train_alone``), by default a checkpoint
    after every epoch; a SIGTERM to this process after the given optimiser step."""
    from dssl.data.imageset import ArrayImageSet
    from dssl.federation import ClientData
    from dssl.methods import create_method
    from dssl.pipeline.pretrain import train_alone

    rng = np.random.default_rng(0)
    images = ArrayImageSet(rng.integers(0, 256, size=(24, 8, 8, 1), dtype=np.uint8), rng.integers(0, 3, size=24), 3)
    torch.manual_seed(0)
    method = create_method("simsiam", "cnn_small", image_size=8, in_chans=1)
    if signal_after_steps is not None:
        steps, original = [], method.after_optimizer_step

        def counting() -> None:
            original()
            steps.append(1)
            if len(steps) == signal_after_steps:
                os.kill(os.getpid(), signal.SIGTERM)

        method.after_optimizer_step = counting
    return train_alone(method, ClientData(images, np.arange(24)), {"epochs": 4, "batch_size": 6}, 3,
                       {"name": "sgd", "base_lr": 0.5, "weight_decay": 1e-4}, folder, {}, interval)


@pytest.mark.usefixtures("single_thread")
def test_a_stop_request_ends_training_alone_after_the_epoch_and_it_resumes_to_the_same_bits(tmp_path: Path,
                                                                                            handlers) -> None:
    from dssl.federation.run_result import round_outcomes

    uninterrupted = _alone(tmp_path / "uninterrupted")
    unsaved = _alone(tmp_path / "no-epoch-checkpoints", interval=CheckpointInterval(1, 3600))
    # writing epoch checkpoints changes no bit
    assert all(torch.equal(unsaved.final_state[k], v) for k, v in uninterrupted.final_state.items())
    preemption.install()
    with pytest.raises(preemption.Preempted, match="after epoch 2 of round 1"):
        _alone(tmp_path / "stopped", signal_after_steps=6)   # during epoch 2 (4 steps an epoch)
    preemption.reset()
    resumed = _alone(tmp_path / "stopped")
    assert all(torch.equal(resumed.final_state[k], v) for k, v in uninterrupted.final_state.items())
    assert round_outcomes(resumed.metrics) == round_outcomes(uninterrupted.metrics)   # the loss too, bit for bit


def test_epoch_checkpoints_need_rounds_of_one_client() -> None:
    from dssl.federation import ClientData, FLConfig, FLSimulator, create_strategy
    from dssl.data.imageset import ArrayImageSet
    from dssl.methods import create_method

    images = ArrayImageSet(np.zeros((8, 8, 8, 1), dtype=np.uint8), np.zeros(8, dtype=np.int64), 1)
    clients = [ClientData(images, np.arange(4)), ClientData(images, np.arange(4, 8))]
    method = create_method("simsiam", "cnn_small", image_size=8, in_chans=1)
    with pytest.raises(ValueError, match="checkpoint_epochs needs rounds of one client"):
        FLSimulator(method, clients, create_strategy("fedavg"), FLConfig(rounds=1, clients_per_round=2),
                    checkpoint_epochs=1)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    root = faults.prepared_project(tmp_path_factory.mktemp("prepared"))

    def longer(params: dict) -> None:
        params["pretrain"]["central"]["train"]["epochs"] = EPOCHS
        params["pretrain"]["local"]["train"]["epochs"] = EPOCHS
        params["pretrain"]["local"]["grids"]["table5"]["seeds"] = [0, 1]
        params["checkpoint"] = {"every_rounds": 2, "every_seconds": 0}

    faults.edit_params(root, longer)
    return root


def _record_checkpoints(monkeypatch) -> list[tuple[int, int | None]]:
    """(completed rounds, epochs of the round under way or None) of every checkpoint written."""
    import dssl.federation.simulator as simulator

    written: list[tuple[int, int | None]] = []
    original = simulator.save_checkpoint

    def recording(directory, payload):
        written.append((payload["completed_rounds"], (payload.get("epoch") or {}).get("epochs")))
        return original(directory, payload)

    monkeypatch.setattr(simulator, "save_checkpoint", recording)
    return written


def _record_epochs(monkeypatch) -> list[int]:
    """The epochs each local training starts from."""
    import dssl.federation.simulator as simulator

    starts: list[int] = []
    original = simulator.train_client

    def recording(*args, start=None, **kwargs):
        starts.append(start.epochs if start is not None else 0)
        return original(*args, start=start, **kwargs)

    monkeypatch.setattr(simulator, "train_client", recording)
    return starts


def _same_files(root: Path, reference: Path, cell: str, folders: list[str]) -> None:
    for folder in folders:
        for name in ("model.pt", "encoder.pt", "history.json"):
            path = f"{cell}/{folder}/{name}"
            assert (root / path).read_bytes() == (reference / path).read_bytes(), path


@pytest.mark.slow
def test_central_checkpoints_every_second_epoch_and_a_kill_resumes_from_it(prepared: Path, tmp_path: Path,
                                                                          monkeypatch) -> None:
    reference = faults.copy_of(prepared, tmp_path / "reference", monkeypatch)
    written = _record_checkpoints(monkeypatch)
    assert main(CENTRAL) == 0
    # per seed: epochs 2 and 4 inside the round, then the round's own checkpoint after epoch 5
    assert written == [(0, 2), (0, 4), (1, None)] * 2

    root = faults.copy_of(prepared, tmp_path / "project", monkeypatch)
    faults.killed_after(root, CENTRAL, checkpoints=2)   # seed 0 after its checkpoint of epoch 4
    assert not (root / CENTRAL_CELL).exists()
    starts = _record_epochs(monkeypatch)
    assert main(CENTRAL) == 0
    assert starts == [4, 0]   # seed 0 goes on with its 5th epoch, seed 1 starts afresh
    _same_files(root, reference, CENTRAL_CELL, ["seed-0", "seed-1"])
    assert not faults.temporaries(root) and not (root / "checkpoints" / "pretrain_central@simsiam-cnn").exists()


@pytest.mark.slow
def test_stand_alone_clients_resume_from_an_epoch_checkpoint(prepared: Path, tmp_path: Path, monkeypatch) -> None:
    reference = faults.copy_of(prepared, tmp_path / "reference", monkeypatch)
    assert main(LOCAL) == 0

    root = faults.copy_of(prepared, tmp_path / "project", monkeypatch)
    faults.killed_after(root, LOCAL, checkpoints=4)   # seed 0's client 3 after its checkpoint of epoch 2
    starts = _record_epochs(monkeypatch)
    assert main(LOCAL) == 0
    # seed 0's client 0 was complete (its round's checkpoint is resumed, nothing trains), client 3 goes on
    # with its 3rd epoch, seed 1's clients start afresh
    assert starts == [2, 0, 0]
    _same_files(root, reference, LOCAL_CELL, [f"seed-{s}/client-{c}" for s in (0, 1) for c in (0, 3)])
    assert not faults.temporaries(root)

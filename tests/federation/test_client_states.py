"""Clients' local states live off the training device (host memory or disk); a round's checkpoint writes
only the states of the clients that trained plus the global model, and a run resumes to the same bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fl_resume_helper as helper
from dssl.artifacts import ArtifactError
from dssl.federation import ClientData, FLConfig, FLSimulator, OptimizerConfig, create_strategy
from dssl.federation import simulator as simulator_module
from dssl.federation.checkpoint import CHECKPOINT_NAME
from dssl.federation.client_states import CLIENT_FOLDER, ClientStates
from dssl.federation.strategies.base import LOCAL_MODEL
from strategy_cases import assert_same, byol

pytestmark = pytest.mark.usefixtures("single_thread")

CLIENTS, PER_ROUND, PER_CLIENT, BATCH, ROUNDS = 6, 2, 8, 4, 4


def fedema(checkpoint_dir=None, storage: str = "host") -> FLSimulator:
    """FedEMA with BYOL: every client that trained keeps its whole model (online, predictor, target)."""
    torch.manual_seed(0)
    method = byol()
    images = helper.tiny_images(num=CLIENTS * PER_CLIENT)
    clients = [ClientData(images, np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT)) for i in range(CLIENTS)]
    config = FLConfig(rounds=ROUNDS, clients_per_round=PER_ROUND, batch_size=BATCH, seed=5,
                      optimizer=OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=1e-4))
    return FLSimulator(method, clients, create_strategy("fedema"), config, checkpoint_dir=checkpoint_dir,
                       client_states=storage)


def nbytes(state) -> int:
    return sum(t.numel() * t.element_size() for t in state.values())


@pytest.fixture(scope="module")
def reference():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # module fixtures come before the per-test single_thread
    try:
        simulator = fedema()
        return simulator, simulator.run()
    finally:
        torch.set_num_threads(threads)


def test_a_round_writes_only_the_clients_that_trained_plus_the_global_model(tmp_path, reference):
    simulator = fedema(tmp_path)
    written: list[tuple[dict, set[str]]] = []
    folder = tmp_path / CLIENT_FOLDER
    result = simulator.run(lambda record: written.append((record, {p.name for p in folder.iterdir()})))
    assert_same(result.final_state, reference[1].final_state)  # checkpoints change no bit
    model = nbytes(simulator.local_states[result.schedule[0][0]][LOCAL_MODEL])
    global_model = nbytes(result.global_states[0])
    assert model > global_model > 0  # the client keeps its target on top of what it shares
    seen: set[str] = set()
    for (record, files), chosen in zip(written, result.schedule):
        new = files - seen
        assert sorted(int(name.split(".")[0].split("-")[1]) for name in new) == chosen  # one file per trained client
        assert all(f".round-{record['round'] - 1}." in name for name in new)
        # FedEMA's bound: the clients that trained plus the global model (and a few KiB of metadata)
        assert (PER_ROUND * model + global_model < record["checkpoint_bytes"]
                < PER_ROUND * model + global_model + 64 * 1024)
        seen = files
    trained = {c for chosen in result.schedule for c in chosen}
    assert len(seen) == len(trained)  # superseded states were deleted: one file per client
    payload = torch.load(tmp_path / CHECKPOINT_NAME, weights_only=True)
    assert "local_states" not in payload
    assert [named is not None for named in payload["client_files"]] == [c in trained for c in range(CLIENTS)]
    assert {named["file"] for named in payload["client_files"] if named} == seen
    assert (tmp_path / CHECKPOINT_NAME).stat().st_size < global_model + 64 * 1024


@pytest.mark.parametrize("storage", ["host", "disk"])
def test_interrupted_run_resumes_to_the_same_bits(storage, tmp_path, reference):
    interrupted = fedema(tmp_path, storage)
    helper.abort_after(interrupted, 2 * PER_ROUND * (PER_CLIENT // BATCH) + 1)  # one step into round 3
    with pytest.raises(helper.Abort):
        interrupted.run()
    resumed_simulator = fedema(tmp_path, storage)
    resumed = resumed_simulator.run()
    assert resumed.resumed_rounds == 2
    assert_same(resumed.final_state, reference[1].final_state)
    assert_same(list(resumed_simulator.local_states), list(reference[0].local_states))
    assert [r["loss"] for r in resumed.metrics] == [r["loss"] for r in reference[1].metrics]


def test_a_kill_between_client_files_and_checkpoint_leaves_the_last_checkpoint_whole(tmp_path, monkeypatch, reference):
    """Killed after round 3's client files are written but before checkpoint.pt names them."""
    original = simulator_module.save_checkpoint

    def dies_at_round_3(directory, payload):
        if payload["completed_rounds"] == 3:
            raise helper.Abort
        return original(directory, payload)

    monkeypatch.setattr(simulator_module, "save_checkpoint", dies_at_round_3)
    with pytest.raises(helper.Abort):
        fedema(tmp_path).run()
    orphans = [p.name for p in (tmp_path / CLIENT_FOLDER).iterdir() if ".round-2." in p.name]
    assert orphans  # round 3's states were written, unnamed
    monkeypatch.setattr(simulator_module, "save_checkpoint", original)
    resumed = fedema(tmp_path).run()
    assert resumed.resumed_rounds == 2
    assert_same(resumed.final_state, reference[1].final_state)


def test_disk_storage_keeps_no_state_in_memory_and_cleans_up(reference):
    simulator = fedema(storage="disk")
    result = simulator.run()
    assert_same(result.final_state, reference[1].final_state)
    states = simulator.local_states
    assert all(entry.state is None or entry.state == {} for entry in states._entries)
    folder = states._folder()
    assert len(list(folder.iterdir())) == len({c for chosen in result.schedule for c in chosen})
    assert_same(list(states), list(reference[0].local_states))
    del simulator, states
    import gc

    gc.collect()
    assert not folder.exists()  # the temporary folder goes with the run


def test_states_are_host_tensors_and_fetch_moves_them():
    states = ClientStates(2)
    states.put(1, {LOCAL_MODEL: {"w": torch.ones(3)}, "fedema": {"mu": 0.5}}, round_index=0)
    assert states[0] == {} and states[1]["fedema"] == {"mu": 0.5}
    assert states[1][LOCAL_MODEL]["w"].device.type == "cpu"
    fetched = states.fetch(1, "meta")
    assert fetched[LOCAL_MODEL]["w"].device.type == "meta" and fetched["fedema"] == {"mu": 0.5}
    assert states[1][LOCAL_MODEL]["w"].device.type == "cpu"  # the stored copy stays on the host
    with pytest.raises(ValueError, match="host: the clients' states in memory"):
        ClientStates(2, "gpu")


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_missing_or_damaged_client_file_is_an_artifact_error(damage, tmp_path):
    fedema(tmp_path).run()
    path = sorted((tmp_path / CLIENT_FOLDER).iterdir())[0]
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:100])
    simulator = fedema(tmp_path)
    with pytest.raises(ArtifactError) as err:
        simulator.run()  # before any training
    message = str(err.value)
    assert message.startswith(f"{path}") and f"rm -r {tmp_path}" in message

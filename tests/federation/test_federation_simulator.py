"""FL / DecL simulators on a tiny SimSiam: reproducibility, equivalences, checkpoints, kill-and-resume."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import fl_resume_helper as helper
import numpy as np
import pytest
import torch

from dssl.federation import (
    CheckpointMismatchError,
    ClientData,
    DecLConfig,
    DecLSimulator,
    FLConfig,
    FLSimulator,
    clients_from_partition,
    create_strategy,
    make_schedule,
)
from dssl.federation.checkpoint import CHECKPOINT_NAME
from dssl.federation.simulator import progress_enabled
from dssl.methods import create_method


pytestmark = pytest.mark.usefixtures("single_thread")


def assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def losses(result) -> list[float]:
    return [record["loss"] for record in result.metrics]


@pytest.fixture(scope="module")
def reference():
    """Uninterrupted runs, shared by the tests that compare against them."""
    return {kind: helper.run(kind) for kind in ("fl", "decl")}


@pytest.mark.parametrize("kind", ["fl", "decl"])
def test_same_seed_gives_identical_weights_and_metrics(kind, reference):
    again = helper.run(kind)
    assert_same_state(again.final_state, reference[kind].final_state)
    assert losses(again) == losses(reference[kind])
    assert again.schedule == reference[kind].schedule
    other = helper.run(kind, seed=4)
    assert any(not torch.equal(value, reference[kind].final_state[key]) for key, value in other.final_state.items())


def test_round_metrics(reference):
    for kind, result in reference.items():
        assert [r["round"] for r in result.metrics] == list(range(1, helper.ROUNDS + 1))
        for record in result.metrics:
            assert np.isfinite(record["loss"]) and record["images_per_s"] > 0 and record["wall_time_s"] > 0
            assert record["steps"] == helper.STEPS_PER_ROUND[kind]
    assert all("consensus_distance" in r for r in reference["decl"].metrics)


def test_schedule_is_reproducible_and_without_replacement():
    schedule = make_schedule(num_clients=10, per_round=5, rounds=50, seed=1)
    assert schedule == make_schedule(10, 5, 50, seed=1)
    assert schedule != make_schedule(10, 5, 50, seed=2)
    for chosen in schedule:
        assert len(set(chosen)) == 5 and chosen == sorted(chosen) and 0 <= min(chosen) and max(chosen) < 10
    counts = np.bincount(np.concatenate(schedule), minlength=10)
    assert counts.sum() == 250 and counts.min() > 0  # every client is drawn over 50 rounds
    with pytest.raises(ValueError):
        make_schedule(3, 4, 1, seed=0)


def _three_clients():
    images = helper.tiny_images(num=36)
    return [ClientData(images, np.arange(i * 12, (i + 1) * 12)) for i in range(3)]


def _decl(mixing: np.ndarray, rounds: int = 1, order: str = "mix_then_train") -> DecLSimulator:
    torch.manual_seed(0)
    method = create_method("simsiam", "cnn_small", image_size=8, in_chans=1)
    config = DecLConfig(rounds=rounds, batch_size=6, seed=5, order=order)
    return DecLSimulator(method, _three_clients(), create_strategy("fedavg"), mixing, config)


def test_train_then_mix_round_is_local_training_then_one_gossip_step():
    mixing = np.array([[1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1 / 2, 1 / 2]])
    isolated, mixed = _decl(np.eye(3), order="train_then_mix"), _decl(mixing, order="train_then_mix")
    isolated.run()
    mixed.run()
    for i in range(3):
        got = mixed.client_state(i)
        for key, value in got.items():
            stacked = torch.stack([isolated.client_state(j)[key] for j in range(3)]).double()
            expected = torch.tensordot(torch.as_tensor(mixing[i]), stacked, dims=1)
            if value.is_floating_point():
                assert torch.allclose(value.double(), expected, atol=1e-6), key
            else:
                assert torch.equal(value, expected.round().to(value.dtype)), key


def test_fl_with_every_client_equals_decl_on_the_complete_graph():
    """Paper A: FL is DecL on the complete graph (uniform averaging over all N clients)."""
    torch.manual_seed(0)
    method = create_method("simsiam", "cnn_small", image_size=8, in_chans=1)
    fl = FLSimulator(method, _three_clients(), create_strategy("fedavg"),
                     FLConfig(rounds=2, batch_size=6, seed=5, clients_per_round=3)).run()
    decl = _decl(np.full((3, 3), 1 / 3), rounds=2).run()
    for key, value in fl.final_state.items():
        if value.is_floating_point():
            assert torch.allclose(value, decl.final_state[key], atol=1e-5), key
        else:
            assert torch.equal(value, decl.final_state[key]), key


def test_checkpoint_of_another_configuration_is_refused_or_restarted(tmp_path, reference):
    done = helper.run("fl", tmp_path)
    assert done.resumed_rounds == 0 and (tmp_path / CHECKPOINT_NAME).is_file()
    assert_same_state(done.final_state, reference["fl"].final_state)  # checkpointing changes nothing
    assert not list(tmp_path.glob(".*.tmp"))
    again = helper.run("fl", tmp_path)  # complete: nothing left to train
    assert again.resumed_rounds == helper.ROUNDS and losses(again) == losses(done)
    with pytest.raises(CheckpointMismatchError, match="different configuration"):
        helper.build("fl", tmp_path, seed=9).run()
    restarted = helper.build("fl", tmp_path, seed=9, on_mismatch="restart").run()
    assert restarted.resumed_rounds == 0
    assert torch.load(tmp_path / CHECKPOINT_NAME, weights_only=True)["completed_rounds"] == helper.ROUNDS


def test_keep_local_keeps_the_predictor_on_the_clients():
    torch.manual_seed(0)
    method = create_method("simsiam", "cnn_small", image_size=8, in_chans=1)
    initial = {k: v.clone() for k, v in method.state_dict().items()}
    simulator = FLSimulator(method, _three_clients(), create_strategy("fedavg", keep_local=True),
                            FLConfig(rounds=2, batch_size=6, clients_per_round=2))
    result = simulator.run()
    local = method.local_state_keys()
    assert local and all(k.startswith("predictor.") for k in local)
    for key in local:  # never aggregated: the global model keeps the initial predictor
        assert torch.equal(result.final_state[key], initial[key])
    assert not torch.equal(result.final_state["projector.0.weight"], initial["projector.0.weight"])
    for client in set(sum(result.schedule, [])):
        kept = simulator.local_states[client]["model"]
        assert sorted(kept) == sorted(local) and not torch.equal(kept[local[0]], initial[local[0]])


def test_keep_local_in_decl_mixes_only_the_shared_keys():
    torch.manual_seed(0)
    method = create_method("simsiam", "cnn_small", image_size=8, in_chans=1)
    simulator = DecLSimulator(method, _three_clients(), create_strategy("fedavg", keep_local=True),
                              np.full((3, 3), 1 / 3), DecLConfig(rounds=1, batch_size=6, order="train_then_mix"))
    simulator.run()
    first, second = simulator.client_state(0), simulator.client_state(1)
    for key, value in first.items():
        same = torch.equal(value, second[key])
        if not key.startswith("predictor."):
            assert same, key  # complete mixing makes every shared tensor equal
        elif value.is_floating_point():
            assert not same, key  # kept local: each client's own predictor


@pytest.mark.parametrize("kind", ["fl", "decl"])
def test_killed_run_resumes_to_identical_final_weights(kind, tmp_path, reference):
    """SIGKILL a training process one step into round 3, resume from its checkpoint, compare."""
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork: the child reuses the imported torch instead of importing it again")
    checkpoints, marker = tmp_path / "ckpt", tmp_path / "paused"
    pause_at = 2 * helper.STEPS_PER_ROUND[kind] + 1
    process = multiprocessing.get_context("fork").Process(
        target=helper.run_until_paused, args=(kind, checkpoints, pause_at, marker))
    process.start()
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert process.is_alive(), f"the training process died early (exit code {process.exitcode})"
            assert time.monotonic() < deadline, "the training process never reached the pause"
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.join(timeout=30)
    finally:
        if process.is_alive():
            process.kill()
            process.join()
    assert process.exitcode == -signal.SIGKILL
    assert torch.load(checkpoints / CHECKPOINT_NAME, weights_only=True)["completed_rounds"] == 2
    resumed = helper.run(kind, checkpoints)
    assert resumed.resumed_rounds == 2
    assert_same_state(resumed.final_state, reference[kind].final_state)
    assert losses(resumed) == losses(reference[kind])


def test_feature_skew_augmentation_is_applied_and_seeded():
    from dssl.data.partition import create_partition

    images = helper.tiny_images(num=24)
    partition = create_partition(images.labels, {"scheme": "feature", "clients": 2}, seed=0)
    clients = clients_from_partition(images, partition)
    assert all(c.augment is not None for c in clients)

    def one_round(with_augment: bool):
        torch.manual_seed(0)
        method = create_method("simsiam", "cnn_small", image_size=8, in_chans=1)
        chosen = clients if with_augment else [ClientData(c.images, c.indices) for c in clients]
        config = FLConfig(rounds=1, batch_size=6, clients_per_round=2)
        return FLSimulator(method, chosen, create_strategy("fedavg"), config).run().final_state

    first, second, plain = one_round(True), one_round(True), one_round(False)
    assert_same_state(first, second)
    assert any(not torch.equal(first[k], plain[k]) for k in first)


def test_progress_bar_is_off_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert not progress_enabled()


def test_strategy_registry_errors():
    with pytest.raises(KeyError, match="fedavg"):
        create_strategy("no-such-strategy")
    with pytest.raises(ValueError, match="strategy 'fedavg' has no option 'mu'"):
        create_strategy("fedavg", mu=0.5)
    with pytest.raises(ValueError, match="aggregation"):
        create_strategy("fedavg", aggregation="median")


@pytest.mark.parametrize("kind", ["fl", "decl"])
def test_a_checkpoint_interval_skips_rounds_but_not_the_last_nor_a_stop_request(kind, tmp_path, reference, monkeypatch):
    """Rounds within ``checkpoint_interval_s`` of the last checkpoint write none; the last round always
    does, and so does a round after which a stop was requested; the result does not change."""
    from dssl.training import preemption

    result = helper.build(kind, tmp_path / "quiet", checkpoint_interval_s=3600.0).run()
    assert [r["checkpoint_bytes"] > 0 for r in result.metrics] == [False] * (len(result.metrics) - 1) + [True]
    assert_same_state(result.final_state, reference[kind].final_state)

    simulator = helper.build(kind, tmp_path / "stopped", checkpoint_interval_s=3600.0)
    monkeypatch.setattr(preemption, "_requested", signal.SIGTERM)   # as a SIGTERM during round 1 leaves it
    with pytest.raises(preemption.Preempted):
        simulator.run(lambda record: preemption.stop_if_requested(f"after round {record['round']}"))
    monkeypatch.undo()
    saved = torch.load(tmp_path / "stopped" / CHECKPOINT_NAME, weights_only=True)
    assert saved["completed_rounds"] == 1
    resumed = helper.build(kind, tmp_path / "stopped", checkpoint_interval_s=3600.0).run()
    assert resumed.resumed_rounds == 1
    assert_same_state(resumed.final_state, reference[kind].final_state)

"""Per-client memory (MoCo's queue and key networks, BYOL's EMA target) stays on its client in FL and DecL."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dssl.config.strategies.fedavg import FedAvgConfig
from dssl.config.strategies.orchestra import OrchestraConfig
from dssl.data.imageset import ArrayImageSet
from dssl.federation import ClientData, DecLConfig, DecLSimulator, FLConfig, FLSimulator, OptimizerConfig
from dssl.federation.strategies.base import LOCAL_MODEL
from dssl.federation.strategies.fedavg import FedAvg
from dssl.methods import create_method

pytestmark = pytest.mark.usefixtures("single_thread")

CLIENTS, PER_CLIENT, BATCH = 3, 8, 4


def clients() -> list[ClientData]:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(CLIENTS * PER_CLIENT, 8, 8, 1), dtype=np.uint8)
    images = ArrayImageSet(pixels, rng.integers(0, 3, size=CLIENTS * PER_CLIENT), 3)
    return [ClientData(images, np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT)) for i in range(CLIENTS)]


def moco():
    torch.manual_seed(0)
    return create_method("moco", "cnn_small", 8, 1, queue_size=16, proj_output_dim=4)


class Recording(FedAvg):
    """FedAvg that records each client's start state and upload, per round."""

    def __init__(self, config=FedAvgConfig()):
        super().__init__(config)
        self.starts: dict[tuple[int, int], dict] = {}
        self.uploads: dict[tuple[int, int], dict] = {}

    def client_update_start(self, client_id, global_state, local_state, ctx):
        start = super().client_update_start(client_id, global_state, local_state, ctx)
        self.starts[ctx.round, client_id] = {k: v.clone() for k, v in start.items()}
        return start

    def client_upload(self, client_id, method, local_state, ctx):
        upload = super().client_upload(client_id, method, local_state, ctx)
        self.uploads[ctx.round, client_id] = {k: v.clone() for k, v in method.state_dict().items()}
        return upload


def memory_keys(method) -> list[str]:
    return method.client_state_keys()


def config(kind: str, rounds: int):
    common = dict(rounds=rounds, batch_size=BATCH, seed=1,
                  optimizer=OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=0.0))
    return FLConfig(clients_per_round=CLIENTS, **common) if kind == "fl" else DecLConfig(**common)


def simulate(kind: str, method, strategy, rounds: int = 2):
    if kind == "fl":
        return FLSimulator(method, clients(), strategy, config(kind, rounds))
    return DecLSimulator(method, clients(), strategy, np.full((CLIENTS, CLIENTS), 1 / CLIENTS), config(kind, rounds))


@pytest.mark.parametrize("kind", ["fl", "decl"])
def test_moco_queue_and_key_networks_stay_with_their_client(kind):
    method = moco()
    initial_queue = method.queue.clone()
    strategy = Recording()
    simulator = simulate(kind, method, strategy)
    result = simulator.run()
    memory = memory_keys(method)
    assert {"queue", "queue_ptr"} <= set(memory) and any(k.startswith("key_encoder.") for k in memory)
    assert not set(memory) & set(strategy.shared_keys)  # never uploaded / aggregated / mixed
    for state in result.global_states:
        assert not set(memory) & set(state)
    if kind == "decl":
        assert not set(memory) & set(simulator.states.keys)
    queues = []
    for client in range(CLIENTS):
        end_of_round_1 = strategy.uploads[0, client]
        start_of_round_2 = strategy.starts[1, client]
        kept = simulator.local_states[client][LOCAL_MODEL]
        for key in memory:  # the client resumes exactly the memory it ended its last round with
            assert torch.equal(start_of_round_2[key], end_of_round_1[key]), key
            assert torch.equal(kept[key], strategy.uploads[1, client][key]), key
        queues.append(kept["queue"])
    assert all(not torch.equal(q, initial_queue) for q in queues)
    assert not torch.equal(queues[0], queues[1]) and not torch.equal(queues[1], queues[2])
    # The shared part is still averaged: uniform FedAvg / complete uniform gossip of round 1.
    for key in strategy.shared_keys:
        if strategy.starts[1, 0][key].is_floating_point():
            mean = torch.stack([strategy.uploads[0, c][key] for c in range(CLIENTS)]).mean(0)
            torch.testing.assert_close(strategy.starts[1, 0][key], mean)


def test_byol_target_is_local_and_starts_from_the_received_online_network():
    torch.manual_seed(0)
    method = create_method("byol", "cnn_small", 8, 1)
    with torch.no_grad():  # make target and online differ at the start, so the copy is visible
        for p in method.target_encoder.parameters():
            p.add_(1.0)
    strategy = Recording()
    FLSimulator(method, clients(), strategy, FLConfig(rounds=2, batch_size=BATCH, clients_per_round=1, seed=0)).run()
    (first_round, first_client), = [k for k in strategy.starts if k[0] == 0]
    start = strategy.starts[first_round, first_client]
    for key in method.part_keys("target"):
        assert torch.equal(start[key], start[method.online_key_of(key)]), key
    assert not set(method.part_keys("target")) & set(strategy.shared_keys)


def test_orchestra_projection_memory_stays_with_its_client():
    from dssl.federation.strategies.orchestra import OrchestraStrategy

    class RecordingOrchestra(Recording, OrchestraStrategy):
        pass

    torch.manual_seed(0)
    method = create_method("orchestra", "cnn_small", 8, 1, num_global_centroids=4, num_local_centroids=2,
                           memory_size=6, proj_hidden_dim=8, proj_output_dim=4)
    strategy = RecordingOrchestra(OrchestraConfig(server_steps=5))
    simulator = simulate("fl", method, strategy, rounds=3)
    result = simulator.run()
    assert memory_keys(method) == ["memory"] and "memory" not in strategy.shared_keys
    assert all("memory" not in state for state in result.global_states)
    for client in range(CLIENTS):
        for rnd in (0, 1):  # the client resumes exactly the memory it ended its last round with
            assert torch.equal(strategy.starts[rnd + 1, client]["memory"], strategy.uploads[rnd, client]["memory"])
        assert torch.equal(simulator.local_states[client][LOCAL_MODEL]["memory"], strategy.uploads[2, client]["memory"])
    ends = [strategy.uploads[2, c]["memory"] for c in range(CLIENTS)]
    assert not torch.equal(ends[0], ends[1]) and not torch.equal(ends[1], ends[2])


@pytest.mark.parametrize("kind", ["fl", "decl"])
def test_moco_code_options_restart_key_networks_and_queue_every_round(kind):
    """Paper B's code: every round a client starts with key networks copied from the query networks it
    receives and with the initial queue (pointer 0); the defaults keep both from the client's last round."""
    torch.manual_seed(0)
    method = create_method("moco", "cnn_small", 8, 1, queue_size=16, proj_output_dim=4,
                           reset_key_encoder=True, reset_queue=True)
    initial = {k: v.clone() for k, v in method.state_dict().items()}
    strategy = Recording()
    simulate(kind, method, strategy).run()
    for client in range(CLIENTS):
        start, last = strategy.starts[1, client], strategy.uploads[0, client]
        for key in method.part_keys("target"):
            assert torch.equal(start[key], start[method.online_key_of(key)]), key
            assert not torch.equal(start[key], last[key]) or not start[key].is_floating_point(), key
        assert torch.equal(start["queue"], initial["queue"]) and int(start["queue_ptr"]) == 0
        assert not torch.equal(last["queue"], initial["queue"])   # it did fill the queue in round 1

"""FeatARC's cluster selection by feature agreement."""

import numpy as np
import pytest
import torch

from dssl.data.imageset import ArrayImageSet
from dssl.federation import ClientData, FLConfig, FLSimulator, OptimizerConfig
from dssl.federation.strategies.featarc_selection import (
    LOCAL_FEATURE_MODEL,
    FeatARCSelection,
    alignment_scores,
    select_cluster,
)
from dssl.methods import create_method

pytestmark = pytest.mark.usefixtures("single_thread")


def test_alignment_by_hand():
    local = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    aligned = torch.tensor([[3.0, 0.0], [0.0, 1.0]])  # cos 1 and 1 -> 1
    mixed = torch.tensor([[1.0, 1.0], [0.0, -1.0]])  # cos 1/sqrt(2) and -1
    scores = alignment_scores(local, [mixed, aligned])
    assert scores == pytest.approx([(2 ** -0.5 - 1) / 2, 1.0])
    assert select_cluster(local, [mixed, aligned]) == 1
    assert select_cluster(local, [aligned, aligned]) == 0  # ties: the first


def clients():
    rng = np.random.default_rng(0)
    images = ArrayImageSet(rng.integers(0, 256, size=(16, 8, 8, 1), dtype=np.uint8), np.zeros(16, int), 1)
    return [ClientData(images, np.arange(i * 8, (i + 1) * 8)) for i in range(2)]


def test_clients_join_the_cluster_of_highest_agreement_and_clusters_average_apart():
    torch.manual_seed(0)
    method = create_method("simclr", "cnn_small", 8, 1)
    strategy = FeatARCSelection(num_clusters=2)
    simulator = FLSimulator(method, clients(), strategy,
                            FLConfig(rounds=2, batch_size=4, clients_per_round=2, seed=0,
                                     optimizer=OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=0.0)))
    initial = [dict(s) for s in simulator.global_states]
    assert len(initial) == 2
    assert not torch.equal(initial[0]["encoder.features.0.weight"], initial[1]["encoder.features.0.weight"])
    chosen = []
    original = strategy.select_global

    def record(client_id, global_states, local_state, ctx):
        index = original(client_id, global_states, local_state, ctx)
        chosen.append((ctx.round, client_id, index, list(strategy.last_scores[client_id])))
        return index

    strategy.select_global = record
    result = simulator.run()
    for _, _, index, scores in chosen:
        assert index == int(np.argmax(scores))
    # Round 1: each client's own model is its initial cluster i mod 2, which agrees with itself (score 1).
    first = {client: (index, scores) for r, client, index, scores in chosen if r == 0}
    assert first[0][0] == 0 and first[0][1][0] == pytest.approx(1.0)
    assert first[1][0] == 1 and first[1][1][1] == pytest.approx(1.0)
    # A cluster nobody chose keeps its model; a chosen one changes.
    picked = {index for r, _, index, _ in chosen if r == 1}
    for j, state in enumerate(result.global_states):
        same = torch.equal(state["encoder.features.0.weight"], initial[j]["encoder.features.0.weight"])
        assert same == (j not in {i for _, _, i, _ in chosen})
    assert picked and all(LOCAL_FEATURE_MODEL in s for s in simulator.local_states)

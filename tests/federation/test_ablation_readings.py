"""Paper B's ablations under both readings: without stop-gradient / without EMA as the methods' papers define
them (the defaults) and as paper B's code runs them (``target_optimized: false``, ``momentum: 1.0`` and the
FedSSL strategy's ``first_round_target: online``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dssl.data.imageset import ArrayImageSet
from dssl.federation import ClientData, FLConfig, FLSimulator, OptimizerConfig, create_strategy
from dssl.federation.local import build_optimizer
from dssl.methods import create_method

pytestmark = pytest.mark.usefixtures("single_thread")


def byol(**hparams):
    torch.manual_seed(0)
    return create_method("byol", "cnn_small", 8, 1, proj_hidden_dim=16, proj_output_dim=8, **hparams)


def steps(method, count: int = 2) -> dict:
    """``count`` SGD steps on one fixed batch with fixed views; the state after them."""
    optimizer = build_optimizer(method, OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=0.0), 0.1)
    images = torch.rand(4, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    for step in range(count):
        optimizer.zero_grad()
        method.training_loss(images, generator=torch.Generator().manual_seed(step))["loss"].backward()
        optimizer.step()
        method.after_optimizer_step()
    return {k: v.clone() for k, v in method.state_dict().items()}


def test_the_codes_no_stop_gradient_keeps_the_target_out_of_the_optimiser_and_equals_stop_gradient():
    with_sg, code = steps(byol()), steps(byol(stop_gradient=False, target_optimized=False))
    for key, value in with_sg.items():
        assert torch.equal(value, code[key]), key
    paper = byol(stop_gradient=False)   # the default reading: the optimiser steps the target too
    assert any(p.requires_grad for p in paper.target_encoder.parameters())
    after = steps(paper)
    assert any(not torch.equal(after[k], with_sg[k]) for k in paper.part_keys("target"))


def test_momentum_one_freezes_the_target_and_out_of_range_fails():
    method = byol(momentum=1.0)
    before = {k: v.clone() for k, v in method.state_dict().items()}
    after = steps(method)
    assert all(torch.equal(after[k], before[k]) for k in method.part_keys("target") if "running" not in k
               and "num_batches" not in k)
    with pytest.raises(ValueError, match="momentum: must be <= 1"):
        byol(momentum=1.5)


def clients():
    rng = np.random.default_rng(0)
    images = ArrayImageSet(rng.integers(0, 256, size=(16, 8, 8, 1), dtype=np.uint8), np.zeros(16, int), 1)
    return [ClientData(images, np.arange(i * 8, (i + 1) * 8)) for i in range(2)]


class Recording:
    """Wraps a strategy's upload to keep each client's state after every round."""

    def __init__(self, strategy):
        self.ends: dict = {}
        original = strategy.client_upload

        def upload(client_id, method, local_state, ctx):
            out = original(client_id, method, local_state, ctx)
            self.ends[ctx.round, client_id] = {k: v.clone() for k, v in method.state_dict().items()}
            return out

        strategy.client_upload = upload


def run(method, first_round_target: str, rounds: int = 2):
    strategy = create_strategy("fedssl", first_round_target=first_round_target)
    record = Recording(strategy)
    FLSimulator(method, clients(), strategy, FLConfig(rounds=rounds, batch_size=4, clients_per_round=2, seed=0,
                optimizer=OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=0.0))).run()
    return record.ends


def test_first_round_target_online_shares_the_target_in_a_clients_first_round_only():
    method = byol(stop_gradient=False, target_optimized=False, momentum=1.0)
    shared, copied = run(method, "online"), run(byol(stop_gradient=False, target_optimized=False, momentum=1.0), "copy")
    targets = method.part_keys("target")
    for client in (0, 1):
        end = shared[0, client]   # round 1: the target leaves as the online network ended it
        for key in targets:
            assert torch.equal(end[key], end[method.online_key_of(key)]), key
        # frozen afterwards (momentum 1, out of the optimiser): round 2 ends with round 1's target
        assert all(torch.equal(shared[1, client][k], end[k]) for k in targets if "running" not in k
                   and "num_batches" not in k)
    # in round 1 the gradient of the target branch reached the online weights: another run than with a copy
    assert not torch.equal(shared[0, 0]["encoder.features.0.weight"], copied[0, 0]["encoder.features.0.weight"])
    with pytest.raises(ValueError, match="first_round_target 'online'"):
        create_strategy("fedssl", first_round_target="online").setup(create_method("simclr", "cnn_small", 8, 1))

"""Local-training pieces: optimizer reuse, parameter groups, learning rates, batches, configs."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from dssl.federation import DecLConfig, FLConfig, OptimizerConfig
from dssl.federation.local import batch_bounds, build_optimizer, reset_optimizer, round_lr
from dssl.federation.state import load_state_, snapshot


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


def _steps(model: nn.Module, optimizer: torch.optim.Optimizer, count: int) -> None:
    generator = torch.Generator().manual_seed(1)
    for _ in range(count):
        loss = model(torch.randn(16, 4, generator=generator)).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


@pytest.mark.parametrize("name", ["sgd", "adamw", "adam"])
def test_reset_optimizer_behaves_like_a_new_one(name):
    config = OptimizerConfig(name=name, base_lr=0.1, weight_decay=0.01)
    model = _model()
    reused = build_optimizer(model, config, lr=0.05)
    _steps(model, reused, 3)  # leaves momentum / moments behind
    start = snapshot(model)
    reset_optimizer(reused, lr=0.02)
    _steps(model, reused, 2)
    after_reuse = snapshot(model)

    load_state_(model, start)
    _steps(model, build_optimizer(model, config, lr=0.02), 2)
    assert all(torch.equal(after_reuse[k], v) for k, v in snapshot(model).items())


def test_norm_and_bias_exemption_from_weight_decay():
    model = _model()
    plain = build_optimizer(model, OptimizerConfig(weight_decay=0.05), lr=0.1)
    assert len(plain.param_groups) == 1 and plain.param_groups[0]["weight_decay"] == 0.05
    groups = build_optimizer(model, OptimizerConfig(weight_decay=0.05, exclude_norm_bias_from_decay=True),
                             lr=0.1).param_groups
    assert [len(g["params"]) for g in groups] == [2, 4]  # two weight matrices; biases and BN affine
    assert [g["weight_decay"] for g in groups] == [0.05, 0.0]
    with pytest.raises(ValueError, match="optimizer"):
        build_optimizer(model, OptimizerConfig(name="lamb"), lr=0.1)


def test_learning_rate_scaling_and_schedule():
    config = OptimizerConfig(base_lr=1.5e-4)
    assert config.lr(128) == pytest.approx(7.5e-5)  # paper A: blr * 128 / 256
    assert round_lr(config, 128, 5, 10) == config.lr(128)
    cosine = OptimizerConfig(base_lr=0.064, schedule="cosine")
    assert round_lr(cosine, 128, 0, 100) == pytest.approx(0.032)  # paper B: 0.032 at batch 128
    assert round_lr(cosine, 128, 50, 100) == pytest.approx(0.032 * 0.5 * (1 + math.cos(math.pi / 2)))


def test_batch_bounds():
    assert batch_bounds(10, 4, drop_last=True) == [(0, 4), (4, 8)]
    assert batch_bounds(10, 4, drop_last=False) == [(0, 4), (4, 8), (8, 10)]
    assert batch_bounds(3, 4, drop_last=True) == [(0, 3)]  # smaller than a batch: still trains
    assert batch_bounds(9, 4, drop_last=False) == [(0, 4), (4, 8)]  # a lone sample cannot train BN
    assert batch_bounds(0, 4, drop_last=False) == []


def test_configs_from_params_mappings():
    config = FLConfig.from_dict({"rounds": 3, "clients_per_round": 2,
                                 "optimizer": {"name": "adamw", "betas": [0.9, 0.95], "weight_decay": 0.05}})
    assert config.optimizer == OptimizerConfig(name="adamw", betas=(0.9, 0.95), weight_decay=0.05)
    assert OptimizerConfig.from_dict({"name": "adamw", "betas": [0.9, 0.95], "weight_decay": 0.05}) == config.optimizer
    with pytest.raises(TypeError, match="clients_per_round"):
        DecLConfig.from_dict({"rounds": 3, "clients_per_round": 2})
    with pytest.raises(ValueError, match="rounds"):
        FLConfig(rounds=0).validate()


def test_adam_couples_weight_decay_into_the_gradient():
    """Dec-SSL's FeatARC trains with Adam and an L2 weight decay: one step from a zero loss gradient moves a
    weight w = 2 by lr * sign(wd * w) = lr; AdamW's decoupled decay moves it by lr * wd * w."""
    moved = {}
    for name in ("adam", "adamw"):
        model = torch.nn.Linear(1, 1, bias=False)
        model.weight.data.fill_(2.0)
        optimizer = build_optimizer(model, OptimizerConfig(name=name, weight_decay=0.1), lr=0.01)
        model.weight.grad = torch.zeros_like(model.weight)
        optimizer.step()
        moved[name] = 2.0 - float(model.weight)
    assert moved == pytest.approx({"adam": 0.01, "adamw": 0.01 * 0.1 * 2.0}, rel=1e-4)

"""Every registered strategy as a tiny run (its method, image size and framework), for tests that must
hold for all of them: the same bits in worker processes as in series, with or without torch's
fill of new memory."""

from __future__ import annotations

import numpy as np
import torch

from dssl.federation import (
    ClientData,
    DecLConfig,
    DecLSimulator,
    FLConfig,
    FLSimulator,
    OptimizerConfig,
    create_strategy,
)
from dssl.methods import create_method

import fl_resume_helper as helper

NUM_CLIENTS, PER_CLIENT, BATCH, ROUNDS = 4, 8, 4, 3
TINY_HEAD = dict(proj_hidden_dim=16, proj_output_dim=8)


def simsiam():
    return create_method("simsiam", "cnn_small", 8, 1)


def byol():
    return create_method("byol", "cnn_small", 8, 1, **TINY_HEAD, pred_hidden_dim=16)


def simclr_feature_wide():
    width = create_method("simclr", "cnn_small", 8, 1).encoder.feature_dim
    return create_method("simclr", "cnn_small", 8, 1, proj_output_dim=width)


def orchestra():
    return create_method("orchestra", "cnn_small", 16, 1, num_global_centroids=8, num_local_centroids=2,
                         memory_size=8, **TINY_HEAD)


def mae():
    return create_method("mae", "vit_small", 8, 1, decoder_dim=16, decoder_heads=2)


# (strategy, its options, the method it trains, image size, framework, simulator options)
CASES = [
    ("fedavg", {}, simsiam, 8, "fl", {}),
    ("fedavg", {"aggregation": "data_size"}, simsiam, 8, "decl", {}),
    ("fedavg", {}, simsiam, 8, "decl", {"push_sum": True}),
    ("fedssl", {"update_predictor": "local"}, byol, 8, "fl", {}),
    ("fedssl", {"first_round_target": "online"}, byol, 8, "fl", {}),
    ("fedu", {"divergence": "code"}, byol, 8, "fl", {}),
    ("fedema", {}, byol, 8, "fl", {}),
    ("fedema", {"divergence": "code"}, byol, 8, "fl", {}),
    ("fedema", {"divergence": "paper_flat", "skipped": "blend"}, byol, 8, "fl", {}),
    ("ldawa", {}, simsiam, 8, "fl", {}),
    ("ldawa", {"warmup_rounds": 1, "granularity": "model"}, simsiam, 8, "fl", {}),
    ("orchestra", {"server_steps": 5}, orchestra, 16, "fl", {}),
    ("featarc", {}, simclr_feature_wide, 8, "fl", {}),
    ("fedmar", {}, mae, 8, "fl", {}),
    ("decmar", {}, mae, 8, "decl", {}),
    ("decmar", {}, mae, 8, "decl", {"order": "train_then_mix"}),
]


def build(case, client_workers: int = 1):
    name, options, method_fn, size, framework, extra = case
    torch.manual_seed(0)
    method = method_fn()
    images = helper.tiny_images(num=NUM_CLIENTS * PER_CLIENT, size=size)
    clients = [ClientData(images, np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT)) for i in range(NUM_CLIENTS)]
    optimizer = OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=1e-4)
    common = dict(rounds=ROUNDS, batch_size=BATCH, seed=2, optimizer=optimizer)
    strategy = create_strategy(name, **options)
    if framework == "fl":
        return FLSimulator(method, clients, strategy, FLConfig(clients_per_round=3, **common),
                           client_workers=client_workers)
    extra = dict(extra)
    order = extra.pop("order", "mix_then_train")
    mixing = helper.RING.T.copy() if extra.get("push_sum") else helper.RING
    return DecLSimulator(method, clients, strategy, mixing, DecLConfig(order=order, **common),
                         client_workers=client_workers, **extra)


def assert_same(a, b, where: str = "") -> None:
    """Equal structures with bit-identical tensors."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert sorted(map(str, a)) == sorted(map(str, b)), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b or (a != a and b != b), where  # NaN equals NaN here


TIMINGS = {"train_time_s", "wall_time_s", "images_per_s", "checkpoint_s"}

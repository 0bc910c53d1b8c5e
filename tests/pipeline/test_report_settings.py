"""The report's Settings, as params.yaml states them: schedules read as English."""

from __future__ import annotations

from dssl.pipeline.report import settings


def params(local_epochs: int) -> dict:
    return {
        "seeds": [0, 1],
        "models": {"mae-vit": {"method": "mae", "backbone": "vit_small"}},
        "strategies": {"fedavg": {"name": "fedavg", "aggregation": "uniform"}},
        "partitions": {"fl-iid": {"dataset": "digits", "scheme": "iid", "clients": 4, "seed": 0}},
        "pretrain": {"dataset": "digits", "image_size": 8,
                     "fl": {"train": {"rounds": 20, "clients_per_round": 2, "local_epochs": local_epochs,
                                      "batch_size": 32}},
                     "central": {"train": {"epochs": 15, "batch_size": 32}}},
        "evaluate": {"datasets": ["digits"], "protocols": {"fl": ["knn"]}},
    }


def test_schedules_count_their_epochs_in_the_singular_and_the_plural() -> None:
    assert settings(params(1))["Training"][1:] == ["FL: 20 rounds x 1 local epoch, 2 clients per round, batch 32",
                                                   "central: 15 epochs, batch 32"]
    assert settings(params(2))["Training"][1] == "FL: 20 rounds x 2 local epochs, 2 clients per round, batch 32"

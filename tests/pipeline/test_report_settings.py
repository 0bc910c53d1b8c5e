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


def test_the_run_span_runs_from_the_first_stage_start_to_the_last_stage_end():
    """A stage logs its runs as it ends: the span starts ``stage_seconds`` before the earliest end and stops at
    the latest, so a report re-run an hour later (it is not among the runs) does not stretch it; a stage's
    older runs do not count, and a span far beyond the stages' own time is left out."""
    import pandas as pd

    from dssl.pipeline.report import run_span

    runs = pd.DataFrame({"stage": ["a", "b", "b", "c"], "start_time": [100_000, 50_000, 400_000, 700_000],
                         "metrics.stage_seconds": [60.0, 5.0, 250.0, 300.0]})
    assert run_span(runs) == {"stages": 3, "stage_seconds": 610.0, "wall_seconds": 660.0}   # 700 - (100 - 60)
    later = pd.concat([runs, pd.DataFrame({"stage": ["a"], "start_time": [9_000_000],
                                           "metrics.stage_seconds": [1.0]})])
    assert run_span(later)["wall_seconds"] is None   # 'a' re-ran 2.5 h later: no single session
    edited = pd.concat([runs, pd.DataFrame({"stage": ["code"], "start_time": [3_000_000],
                                            "metrics.stage_seconds": [3.0]})])
    assert run_span(edited) == {"stages": 4, "stage_seconds": 613.0, "wall_seconds": 660.0}   # a source edit

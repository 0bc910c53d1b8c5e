"""Stand-alone cells: a seed's score is the mean over its clients' own encoders, and a cell whose seeds
hold different clients is refused before any evaluation."""

from __future__ import annotations

from pathlib import Path

import pytest

from dssl.artifacts import ArtifactError
from dssl.pipeline.evaluate import mean_over_clients, stand_alone_encoders


def record(seed: int, client: int, test_acc: float, protocol: str = "linear_probe") -> dict:
    return {"framework": "local", "model": "byol-cnn", "seed": seed, "dataset": "digits", "protocol": protocol,
            "test_acc": test_acc, "val_acc": test_acc / 2, "selected": {"lr": 0.01 * (client + 1)}, "client": client}


def test_a_seeds_result_is_the_mean_over_its_clients_each_kept():
    results = [(record(0, 0, 0.5), 100.0), (record(0, 1, 0.7), 120.0), (record(1, 0, 0.6), 90.0),
               (record(1, 1, 0.8), 80.0), (record(0, 0, 0.9, "knn"), 70.0)]
    merged = {(r["seed"], r["protocol"]): (r, rss) for r, rss in mean_over_clients(results)}
    assert set(merged) == {(0, "linear_probe"), (1, "linear_probe"), (0, "knn")}
    seed0, rss = merged[(0, "linear_probe")]
    assert seed0["test_acc"] == pytest.approx(0.6) and seed0["val_acc"] == pytest.approx(0.3) and rss == 120.0
    assert seed0["clients"] == {"0": 0.5, "1": 0.7} and "client" not in seed0
    assert seed0["selected"] == {"0": {"lr": 0.01}, "1": {"lr": 0.02}}
    assert merged[(0, "knn")][0]["clients"] == {"0": 0.9}


def _encoders(cell: Path, seeds_clients: dict[int, list[int]]) -> None:
    for seed, clients in seeds_clients.items():
        for client in clients:
            folder = cell / f"seed-{seed}" / f"client-{client}"
            folder.mkdir(parents=True)
            (folder / "encoder.pt").write_bytes(b"weights")


def test_stand_alone_clients_are_those_every_seed_holds(tmp_path: Path):
    _encoders(tmp_path / "ok", {0: [0, 9], 1: [0, 9]})
    assert stand_alone_encoders(tmp_path / "ok", [0, 1]) == (0, 9)
    _encoders(tmp_path / "mixed", {0: [0, 9], 1: [0]})
    with pytest.raises(ArtifactError, match=r"do not hold the same stand-alone clients \(\[\[0, 9\], \[0\]\]\)"):
        stand_alone_encoders(tmp_path / "mixed", [0, 1])
    with pytest.raises(ArtifactError) as absent:   # `dssl evaluate_local` adds the command that rebuilds it
        stand_alone_encoders(tmp_path / "absent", [0])
    assert absent.value.path == tmp_path / "absent"


def test_merged_clients_keep_their_config_and_say_how_they_resumed():
    from dssl.pipeline.evaluate import TaskResult, _clients_merged

    outcomes = [(TaskResult(record(0, 0, 0.5), {"epochs": 3}, "no"), 10.0),
                (TaskResult(record(0, 1, 0.7), {"epochs": 3}, "checkpoint"), 12.0),
                (TaskResult(record(1, 0, 0.6), {"epochs": 3}, "result"), 9.0),
                (TaskResult(record(1, 1, 0.8), {"epochs": 3}, "result"), 8.0)]
    merged = {outcome.record["seed"]: (outcome, rss) for outcome, rss in _clients_merged(outcomes)}
    assert merged[0][0].resumed == "partly" and merged[1][0].resumed == "result"
    assert merged[0][0].config == {"epochs": 3} and merged[0][0].record["test_acc"] == pytest.approx(0.6)
    assert merged[0][1] == 12.0

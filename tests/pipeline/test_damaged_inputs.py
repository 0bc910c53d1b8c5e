"""A stage whose input is a damaged output of an earlier stage stops with one message naming the file,
the problem and the stage that rebuilds it (exit 2), and leaves its previous outputs in place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dssl.cli import EXIT_BAD_INPUT, main


@pytest.fixture
def ci_project(make_project, monkeypatch):
    root = make_project("configs/ci.yaml")
    monkeypatch.chdir(root)
    monkeypatch.setenv("DSSL_WARM", "0")
    monkeypatch.delenv("DVC_ROOT", raising=False)
    assert main(["prepare", "digits"]) == 0
    assert main(["partitions"]) == 0
    return root


def test_a_truncated_prepared_array_names_the_stage_that_rebuilds_it(ci_project: Path, capsys) -> None:
    npz = ci_project / "data/prepared/digits/train.npz"
    npz.write_bytes(npz.read_bytes()[:4000])
    before = (ci_project / "data/partitions/fl-iid/partition.json").read_bytes()
    capsys.readouterr()
    assert main(["partitions"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: data/prepared/digits/train.npz: ")
    assert "`dvc checkout --force data/prepared/digits/train.npz`" in err
    assert "`dvc repro -s -f pipelines/prepare/digits/dvc.yaml:prepare@digits`" in err
    assert "Traceback" not in err
    assert (ci_project / "data/partitions/fl-iid/partition.json").read_bytes() == before
    assert not [p for p in (ci_project / "data/partitions").iterdir() if p.name.startswith(".")]


def test_a_partition_missing_a_key_fails_the_training_stage_before_training(ci_project: Path, capsys) -> None:
    partition = ci_project / "data/partitions/fl-iid/partition.json"
    partition.write_text(partition.read_text().replace('"client_augment"', '"renamed"'))
    capsys.readouterr()
    assert main(["pretrain_fl", "simsiam-cnn", "fl-iid", "fedavg"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "partition.json: missing key 'client_augment'" in err and "`dvc repro -s -f dvc.yaml:partitions`" in err
    assert not (ci_project / "models").exists() or not any((ci_project / "models").rglob("*.pt"))
    assert os.environ.get("DSSL_WARM") == "0"

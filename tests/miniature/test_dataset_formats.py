"""The datasets the miniature runs write are read in their real formats: a CIFAR python tarball that is
not the official release (``verify_md5: false``; its own md5 recorded), a JPEG ImageFolder tree."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from miniature import CIFAR, write_cifar, write_image_folder

from dssl.config.params import validate
from dssl.data.datasets import DATASETS, DatasetError, load_split


@pytest.mark.parametrize("name, classes", [("cifar10", None), ("cifar100", 20)])
def test_a_cifar_format_tarball_is_read_unverified(tmp_path: Path, name: str, classes: int | None) -> None:
    root = write_cifar(tmp_path / "raw", name, train_each=3, test_each=1, classes=classes)
    out = tmp_path / "prepared"
    meta = DATASETS[name].prepare({"root": str(root), "verify_md5": False}, out)
    present = classes or CIFAR[name]["classes"]
    train, test = load_split(out, "train"), load_split(out, "test")
    assert np.bincount(train.labels).tolist() == [3] * present and len(test.labels) == present
    assert meta["num_classes"] == CIFAR[name]["classes"]  # the label names list every class
    tarball = root / CIFAR[name]["tarball"]
    assert hashlib.md5(tarball.read_bytes()).hexdigest() in meta["source"] and "not verified" in meta["source"]
    assert json.loads((out / "meta.json").read_text())["spec"]["verify_md5"] is False


def test_a_missing_tarball_and_a_bad_flag_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no .*cifar-10-python.tar.gz .*and no extracted"):
        DATASETS["cifar10"].prepare({"root": str(tmp_path), "verify_md5": False}, tmp_path / "out")
    problems = validate({"datasets": {"cifar10": {"verify_md5": "no"}}}, tmp_path)
    assert any(p.path == "datasets.cifar10.verify_md5" for p in problems)


def test_an_image_folder_tree_of_jpegs_is_prepared(tmp_path: Path) -> None:
    root = write_image_folder(tmp_path / "imagenet", 3, {"train": 2, "val": 1}, side=20)
    assert len(list(root.rglob("*.JPEG"))) == 9
    meta = DATASETS["imagenet"].prepare({"root": str(root), "image_size": 16}, tmp_path / "out")
    assert meta["sizes"] == {"train": 6, "test": 3} and meta["image_shape"] == [3, 16, 16]

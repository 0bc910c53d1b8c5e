"""Mini-ImageNet as distributed: the few-shot split (train/val/test with disjoint classes) and one pooled
folder are both accepted, pretraining gets every image by default, and a folder of no known layout is one
clear error saying what to put where. The trees hold real JPEG files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dssl.data.datasets import DATASETS, DatasetError, load_split

ENTRY = DATASETS["mini_imagenet"]
PER_CLASS = 4
# The few-shot split's shape in miniature: disjoint classes, more in train than in val and test.
FEW_SHOT = {"train": ("n01", "n04", "n05"), "val": ("n03",), "test": ("n02", "n06")}
CLASSES = sorted(c for classes in FEW_SHOT.values() for c in classes)


def write_jpegs(folder: Path, label: int) -> None:
    folder.mkdir(parents=True)
    for i in range(PER_CLASS):
        shade = 30 * label + i
        Image.new("RGB", (12 + i, 10), (shade, 255 - shade, 100)).save(folder / f"{folder.name}_{i:04d}.jpg",
                                                                       quality=95)


def few_shot_tree(root: Path) -> Path:
    for split, classes in FEW_SHOT.items():
        for name in classes:
            write_jpegs(root / split / name, CLASSES.index(name))
    return root


def pooled_tree(root: Path) -> Path:
    for label, name in enumerate(CLASSES):
        write_jpegs(root / name, label)
    return root


def mean_colours(images) -> np.ndarray:
    batch = images.get_batch(np.arange(len(images))).float().mean(dim=(2, 3))
    return batch.numpy()


@pytest.mark.parametrize("make, layout", [(few_shot_tree, "few_shot"), (pooled_tree, "pooled")])
def test_every_image_pretrains_by_default(make, layout, tmp_path: Path) -> None:
    root = make(tmp_path / "mini")
    spec = {"root": str(root), "image_size": 8}
    total = len(CLASSES) * PER_CLASS
    assert ENTRY.split_sizes(spec) == {"train": total} and ENTRY.train_size(spec) == total
    meta = ENTRY.prepare(spec, tmp_path / "out")
    assert meta["folder_layout"] == layout and meta["splits"] == ["train"]
    assert meta["classes"] == CLASSES and meta["num_classes"] == len(CLASSES)
    train = load_split(tmp_path / "out", "train")
    assert len(train) == total and np.bincount(train.labels).tolist() == [PER_CLASS] * len(CLASSES)
    # each image carries its own class's colour (JPEG is lossy: within a few levels)
    red = mean_colours(train)[:, 0]
    expected = np.repeat(30 * np.arange(len(CLASSES)), PER_CLASS) + np.tile(np.arange(PER_CLASS), len(CLASSES))
    assert np.abs(red - expected).max() < 4
    with pytest.raises(DatasetError, match=r"has no split 'test'; prepared splits: \['train'\]"):
        load_split(tmp_path / "out", "test")


def test_the_few_shot_split_pooled_and_then_split_by_test_fraction(tmp_path: Path) -> None:
    root = few_shot_tree(tmp_path / "mini")
    spec = {"root": str(root), "image_size": 8, "test_fraction": 0.25}
    total = len(CLASSES) * PER_CLASS
    assert ENTRY.split_sizes(spec) == {"train": total - 6, "test": 6}
    meta = ENTRY.prepare(spec, tmp_path / "out")
    assert meta["sizes"] == {"train": total - 6, "test": 6}
    assert meta["split_sources"]["test"].startswith("stratified 0.25 of every class folder of train/, val/ and test/")
    test = load_split(tmp_path / "out", "test")
    assert np.bincount(test.labels).tolist() == [1] * len(CLASSES)  # every class, val's and test's too


def test_published_sizes_plan_a_run_before_the_data_is_there() -> None:
    assert ENTRY.planned_sizes({"root": "absent"}) == ({"train": 60_000}, False)
    assert ENTRY.planned_sizes({"root": "absent", "test_fraction": 0.2}) == ({"train": 48_000, "test": 12_000}, False)
    assert DATASETS["imagenet"].planned_sizes({}) == ({"train": 1_281_167, "test": 50_000}, False)
    assert DATASETS["cifar10"].planned_sizes({}) == ({"train": 50_000, "test": 10_000}, True)


@pytest.mark.parametrize("how, problem", [
    ("overlap", "neither disjoint (the few-shot split) nor those of train/ again (a split of the images): val/ shares "
                "1 of its 2 classes with train/"),
    ("no_train", "has val/, test/ but no train/"),
    ("empty", "holds no class folders"),
    ("loose_images", "holds no class folders"),
])
def test_a_folder_of_no_known_layout_is_one_error_saying_what_to_put_where(how, problem, tmp_path: Path) -> None:
    root = tmp_path / "mini"
    if how == "overlap":
        few_shot_tree(root)
        write_jpegs(root / "val" / "n01", 0)  # a training class in val/ too
    elif how == "no_train":
        few_shot_tree(root)
        for path in sorted((root / "train").rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (root / "train").rmdir()
    else:
        root.mkdir()
        if how == "loose_images":
            Image.new("RGB", (4, 4)).save(root / "a.jpg")
    with pytest.raises(DatasetError) as caught:
        ENTRY.prepare({"root": str(root), "image_size": 8}, tmp_path / "out")
    message = str(caught.value)
    assert message.startswith("mini_imagenet: ") and problem in message
    assert "Accepted layouts: (1) the few-shot split as distributed: <root>/train/<class>/<images>" in message
    assert "(2) one folder of class folders: <root>/<class>/<images>" in message
    assert "set datasets.mini_imagenet.root in params.yaml to that folder" in message
    assert not (tmp_path / "out" / "train.npy").exists()
    assert ENTRY.split_sizes({"root": str(root)}) is None

"""Datasets: digits split, CIFAR conversion and offline errors, image folders, load_split."""

from __future__ import annotations

import hashlib
import json
import pickle
import urllib.error
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image

from dssl.artifacts import ArtifactError
from dssl.data.datasets import DATASETS, DatasetError, load_split
from dssl.data.imageset import ArrayImageSet, MemmapImageSet


def test_registry_names() -> None:
    assert set(DATASETS) == {"digits", "digits_on_photos", "cifar10", "cifar100", "mini_imagenet", "imagenet"}


def test_unknown_spec_key_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="unknown key"):
        DATASETS["digits"].prepare({"test_frac": 0.2}, tmp_path)


# --- digits ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("digits")
    DATASETS["digits"].prepare({}, out)
    return out


def test_digits_files_and_meta(digits_dir: Path) -> None:
    meta = json.loads((digits_dir / "meta.json").read_text())
    assert meta["num_classes"] == 10 and meta["classes"] == [str(d) for d in range(10)]
    assert meta["sizes"] == {"train": 1347, "test": 450}
    assert meta["image_shape"] == [1, 8, 8]
    assert meta["split"] == {"method": "stratified", "test_fraction": 0.25, "seed": 0}
    assert DATASETS["digits"].train_size({}) == 1347
    with np.load(digits_dir / "train.npz") as archive:
        images, labels = archive["images"], archive["labels"]
    assert images.dtype == np.uint8 and images.shape == (1347, 8, 8, 1)
    assert labels.dtype == np.int64
    assert images.max() == 255 and images.min() == 0


def test_digits_split_is_stratified_and_disjoint(digits_dir: Path) -> None:
    train, test = load_split(digits_dir, "train"), load_split(digits_dir, "test")
    total = np.bincount(train.labels, minlength=10) + np.bincount(test.labels, minlength=10)
    assert np.abs(np.bincount(test.labels, minlength=10) - 0.25 * total).max() <= 1
    from sklearn.datasets import load_digits

    source = load_digits()
    pixels = np.round(source.images * 255 / 16).astype(np.uint8)
    flat = {(bytes(img), int(label)) for img, label in zip(pixels, source.target)}
    seen = [(bytes(img[0].numpy()), int(label)) for split in (train, test)
            for img, label in zip(split.get_batch(np.arange(len(split))), split.labels)]
    assert len(seen) == 1797 and set(seen) <= flat


def test_digits_bytes_are_deterministic(tmp_path: Path, digits_dir: Path) -> None:
    DATASETS["digits"].prepare({}, tmp_path)
    for name in ("train.npz", "test.npz", "meta.json"):
        assert (tmp_path / name).read_bytes() == (digits_dir / name).read_bytes()
    with zipfile.ZipFile(tmp_path / "train.npz") as archive:
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_digits_split_seed_changes_split(tmp_path: Path, digits_dir: Path) -> None:
    DATASETS["digits"].prepare({"split_seed": 1, "test_fraction": 0.2}, tmp_path)
    expected = DATASETS["digits"].train_size({"test_fraction": 0.2})
    assert load_split(tmp_path, "train").labels.shape == (expected,)
    assert (tmp_path / "test.npz").read_bytes() != (digits_dir / "test.npz").read_bytes()


def test_array_image_set_batches(digits_dir: Path) -> None:
    train = load_split(digits_dir, "train")
    assert isinstance(train, ArrayImageSet) and train.num_classes == 10 and len(train) == 1347
    with np.load(digits_dir / "train.npz") as archive:
        images = archive["images"]
    batch = train.get_batch(torch.tensor([5, 0, 5]))
    assert batch.dtype == torch.uint8 and batch.shape == (3, 1, 8, 8)
    assert torch.equal(batch[0], torch.from_numpy(images[5]).permute(2, 0, 1))
    assert torch.equal(batch[0], batch[2])


def test_unknown_split_and_unprepared_folder(digits_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no split 'val'"):
        load_split(digits_dir, "val")
    with pytest.raises(ArtifactError, match="not a prepared dataset"):
        load_split(tmp_path, "train")


# --- CIFAR ----------------------------------------------------------------------------------------


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _fake_cifar(root: Path, cls: type, monkeypatch: pytest.MonkeyPatch, per_file: int,
                classes: list[str]) -> None:
    """Pickles in torchvision's CIFAR format; the expected md5s are pointed at these files."""
    folder = root / cls.base_folder
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    label_key = "labels" if cls is torchvision.datasets.CIFAR10 else "fine_labels"
    lists = {}
    for attr in ("train_list", "test_list"):
        entries = []
        for name, _ in getattr(cls, attr):
            batch = {"data": rng.integers(0, 256, (per_file, 3 * 32 * 32), dtype=np.uint8),
                     label_key: [int(i % len(classes)) for i in range(per_file)]}
            (folder / name).write_bytes(pickle.dumps(batch))
            entries.append([name, _md5(folder / name)])
        lists[attr] = entries
    meta_file = folder / cls.meta["filename"]
    meta_file.write_bytes(pickle.dumps({cls.meta["key"]: classes}))
    for attr, entries in lists.items():
        monkeypatch.setattr(cls, attr, entries)
    monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": _md5(meta_file)})


@pytest.mark.parametrize("name, cls, files", [
    ("cifar10", torchvision.datasets.CIFAR10, 5),
    ("cifar100", torchvision.datasets.CIFAR100, 1),
])
def test_cifar_conversion(name: str, cls: type, files: int, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "raw"
    classes = [f"class{i}" for i in range(3)]
    _fake_cifar(root, cls, monkeypatch, per_file=4, classes=classes)
    out = tmp_path / "prepared"
    meta = DATASETS[name].prepare({"root": str(root)}, out)
    assert meta["classes"] == classes and meta["sizes"] == {"train": 4 * files, "test": 4}
    assert meta["image_shape"] == [3, 32, 32]
    expected = cls(str(root), train=True)
    train = load_split(out, "train")
    assert np.array_equal(train.labels, np.asarray(expected.targets))
    batch = train.get_batch([1])
    assert torch.equal(batch[0], torch.from_numpy(expected.data[1]).permute(2, 0, 1))
    first = pickle.loads((root / cls.base_folder / cls.train_list[0][0]).read_bytes())
    assert np.array_equal(batch[0].numpy().reshape(-1), first["data"][1])


def test_cifar_offline_error_says_what_to_place_where(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(torchvision.datasets.cifar, "download_and_extract_archive", offline)
    root = tmp_path / "raw" / "cifar10"
    with pytest.raises(DatasetError) as caught:
        DATASETS["cifar10"].prepare({"root": str(root)}, tmp_path / "out")
    message = str(caught.value)
    assert "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz" in message
    assert "c58f30108f718f92721af3b95e74349a" in message
    assert str(root / "cifar-10-python.tar.gz") in message
    assert "name resolution" in message


def test_cifar_checksum_failure_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def corrupt(*args: object, **kwargs: object) -> None:
        raise RuntimeError("File not found or corrupted.")

    monkeypatch.setattr(torchvision.datasets.cifar, "download_and_extract_archive", corrupt)
    root = tmp_path / "raw"
    (root / "cifar-100-python").mkdir(parents=True)
    (root / "cifar-100-python" / "train").write_bytes(b"not a pickle")
    with pytest.raises(DatasetError, match="md5 check") as caught:
        DATASETS["cifar100"].prepare({"root": str(root)}, tmp_path / "out")
    assert "eb9058c3a382ffc7106e4002c42a8d85" in str(caught.value)


# --- image folders --------------------------------------------------------------------------------


def _write_image(path: Path, size: tuple[int, int], value: int, mode: str = "RGB") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    colour = value if mode == "L" else (value, 255 - value, 7) + ((255,) if mode == "RGBA" else ())
    Image.new(mode, size, colour).save(path)


def _folder(root: Path, splits: dict[str, int], classes: tuple[str, ...] = ("cat", "dog", "owl")) -> Path:
    for split, per_class in splits.items():
        for c, name in enumerate(classes):
            for i in range(per_class):
                mode = ("RGB", "L", "RGBA")[i % 3]
                suffix = (".png", ".PNG", ".png")[i % 3]
                _write_image(root / split / name / f"img{i}{suffix}", (10 + i, 12), 40 * c + i, mode)
    return root


def test_mini_imagenet_carves_a_stratified_test_split(tmp_path: Path) -> None:
    root = _folder(tmp_path / "mini", {"train": 5})
    (root / "train" / "cat" / "notes.txt").write_text("ignored: not an image")
    spec = {"root": str(root), "image_size": 6, "test_fraction": 0.4}
    assert DATASETS["mini_imagenet"].train_size(spec) == 9
    meta = DATASETS["mini_imagenet"].prepare(spec, tmp_path / "out")
    assert meta["classes"] == ["cat", "dog", "owl"] and meta["splits"] == ["test", "train"]
    assert meta["sizes"] == {"train": 9, "test": 6}
    train, test = load_split(tmp_path / "out", "train"), load_split(tmp_path / "out", "test")
    assert isinstance(train, MemmapImageSet) and train.image_shape == (3, 6, 6)
    assert np.bincount(test.labels).tolist() == [2, 2, 2]
    train_paths, test_paths = (_index_paths(tmp_path / "out" / f"{split}.csv") for split in ("train", "test"))
    assert len(train_paths) == 9 and len(test_paths) == 6 and not set(train_paths) & set(test_paths)


def _index_paths(index: Path) -> list[str]:
    lines = index.read_text().splitlines()
    assert lines[0] == "path,label,bytes,md5"
    return [line.split(",")[0] for line in lines[1:]]


def test_file_image_set_decodes_to_fixed_size(tmp_path: Path) -> None:
    root = _folder(tmp_path / "mini", {"train": 3, "val": 1, "test": 2})
    DATASETS["mini_imagenet"].prepare({"root": str(root), "image_size": 8}, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["splits"] == ["test", "train", "val"]
    test = load_split(tmp_path / "out", "test")
    batch = test.get_batch(np.arange(len(test)))
    assert batch.dtype == torch.uint8 and batch.shape == (6, 3, 8, 8)
    paths = _index_paths(tmp_path / "out" / "test.csv")
    dog_rgb = paths.index("test/dog/img0.png")
    assert test.labels[dog_rgb] == 1
    assert batch[dog_rgb, :, 4, 4].tolist() == [40, 215, 7]
    dog_gray = paths.index("test/dog/img1.PNG")
    assert batch[dog_gray, :, 0, 0].tolist() == [41, 41, 41]


def test_imagenet_val_is_the_test_split(tmp_path: Path) -> None:
    root = _folder(tmp_path / "imagenet", {"train": 2, "val": 1})
    meta = DATASETS["imagenet"].prepare({"root": str(root), "image_size": 8}, tmp_path / "out")
    assert meta["sizes"] == {"train": 6, "test": 3}
    assert meta["split_sources"]["test"] == "val/"
    assert DATASETS["imagenet"].train_size({"root": str(root)}) == 6


def _break(root: Path, how: str) -> None:
    if how == "no_root":
        return
    if how == "no_train":
        (root / "val" / "cat").mkdir(parents=True)
        return
    _folder(root, {"train": 2, "val": 1})
    if how == "no_class_dirs":
        for path in sorted((root / "train").rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (root / "train" / "loose.png").write_bytes(b"")
    elif how == "empty_class":
        (root / "train" / "emu").mkdir()
    elif how == "foreign_class":
        _write_image(root / "val" / "emu" / "a.png", (4, 4), 1)
    elif how == "no_val":
        for path in sorted((root / "val").rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (root / "val").rmdir()


@pytest.mark.parametrize("how, problem", [
    ("no_root", "does not exist"),
    ("no_train", "missing folder"),
    ("no_class_dirs", "has no class folders"),
    ("empty_class", "holds no image files"),
    ("foreign_class", "not in train/"),
    ("no_val", "missing folder"),
])
def test_malformed_folders_are_clear_errors(how: str, problem: str, tmp_path: Path) -> None:
    root = tmp_path / "imagenet"
    _break(root, how)
    with pytest.raises(DatasetError, match=problem) as caught:
        DATASETS["imagenet"].prepare({"root": str(root)}, tmp_path / "out")
    assert "<root>/train/<class>/<images> and <root>/val/<class>/<images>" in str(caught.value)


def test_folder_root_is_required(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="datasets.mini_imagenet.root"):
        DATASETS["mini_imagenet"].prepare({}, tmp_path / "out")
    assert DATASETS["mini_imagenet"].train_size({}) is None

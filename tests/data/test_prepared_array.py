"""Image folders decoded once into a memory-mapped array: pixels, manifest, errors, checksums, atomicity."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from dssl.artifacts import ArtifactError
from dssl.data import prepared_array
from dssl.data.datasets import DATASETS, DatasetError, load_split
from dssl.data.imageset import MemmapImageSet

SIZE = 16
# (height, width, mode): non-square, smaller than the target, greyscale, and one large enough for
# JPEG draft decoding to reduce its scale.
SHAPES = [(20, 30, "RGB"), (16, 16, "RGB"), (12, 9, "RGB"), (25, 18, "L"), (70, 90, "RGB")]


def _jpegs(root: Path, split: str, classes: tuple[str, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    for c, name in enumerate(classes):
        for i, (height, width, mode) in enumerate(SHAPES):
            pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
            pixels[: height // 2] //= 2 + c  # some structure, so the resize is not of pure noise
            image = Image.fromarray(pixels).convert(mode)
            path = root / split / name / f"img{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            image.save(path, quality=90)


def _expected(path: Path) -> np.ndarray:
    """The manifest's resize rule, written out with PIL: draft, RGB, centre square crop, bicubic."""
    with Image.open(path) as image:
        image.draft("RGB", (SIZE, SIZE))
        rgb = image.convert("RGB")
    square = ImageOps.fit(rgb, (SIZE, SIZE), method=Image.Resampling.BICUBIC)
    return np.asarray(square).transpose(2, 0, 1)


@pytest.fixture()
def imagenet(tmp_path: Path) -> Path:
    root = tmp_path / "imagenet"
    _jpegs(root, "train", ("n01", "n02", "n03"), seed=0)
    _jpegs(root, "val", ("n01", "n02", "n03"), seed=1)
    return root


def _prepare(root: Path, out: Path) -> dict:
    return DATASETS["imagenet"].prepare({"root": str(root), "image_size": SIZE}, out)


def test_prepared_array_equals_the_decoded_images(imagenet: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    meta = _prepare(imagenet, out)
    assert meta["format"] == "memmap" and meta["layout"] == "NCHW" and meta["resize"] == prepared_array.RESIZE_RULE
    assert meta["sizes"] == {"train": 15, "test": 15} and meta["classes"] == ["n01", "n02", "n03"]
    for split in ("train", "test"):
        images = load_split(out, split)
        assert isinstance(images, MemmapImageSet) and images.image_shape == (3, SIZE, SIZE)
        batch = images.get_batch(np.arange(len(images))).numpy()
        rows = (out / f"{split}.csv").read_text().splitlines()
        assert rows[0] == "path,label,bytes,md5"
        for row, line in enumerate(rows[1:]):
            path, label, size, md5 = line.split(",")
            source = imagenet / path
            np.testing.assert_array_equal(batch[row], _expected(source), err_msg=path)
            assert int(label) == images.labels[row] == ["n01", "n02", "n03"].index(Path(path).parent.name)
            assert int(size) == source.stat().st_size
            assert md5 == hashlib.md5(source.read_bytes()).hexdigest()
    on_disk = np.load(out / "train.npy", mmap_mode="r")
    assert isinstance(on_disk, np.memmap) and on_disk.shape == (15, 3, SIZE, SIZE)


def test_blocks_and_threads_do_not_change_the_bytes(imagenet: Path, tmp_path: Path) -> None:
    files = sorted(imagenet.rglob("*.jpg"))
    one = prepared_array.write_image_array(tmp_path / "one.npy", files, SIZE, workers=1)
    many = prepared_array.write_image_array(tmp_path / "many.npy", files, SIZE, workers=3, chunk_images=4)
    assert (tmp_path / "one.npy").read_bytes() == (tmp_path / "many.npy").read_bytes()
    assert len(many.chunk_md5) == 8 and one.records == many.records
    images = MemmapImageSet(tmp_path / "many.npy", np.zeros(len(files)), 1, 4, many.chunk_md5)
    images.verify(workers=2)
    assert images.verified


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[:64] = bytes(64)  # SOI marker and headers gone: not recognisable as an image
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_truncate, _corrupt])
def test_a_damaged_jpeg_is_one_clear_error_naming_it(damage, imagenet: Path, tmp_path: Path) -> None:
    bad = imagenet / "val" / "n02" / "img3.jpg"
    damage(bad)
    out = tmp_path / "out"
    with pytest.raises(DatasetError) as caught:
        _prepare(imagenet, out)
    message = str(caught.value)
    assert message.startswith("imagenet: 1 image file(s) cannot be decoded (corrupt or truncated)")
    assert str(bad) in message and "Replace each with an intact copy" in message
    assert list(out.iterdir()) == []  # train decoded fine, but nothing of it was kept


def test_every_bad_file_is_listed(imagenet: Path, tmp_path: Path) -> None:
    bad = [imagenet / "train" / "n01" / "img0.jpg", imagenet / "train" / "n03" / "img4.jpg"]
    _truncate(bad[0])
    _corrupt(bad[1])
    with pytest.raises(DatasetError, match="2 image file") as caught:
        _prepare(imagenet, tmp_path / "out")
    assert all(str(path) in str(caught.value) for path in bad)


def test_a_failed_prepare_leaves_the_previous_output_untouched(imagenet: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _prepare(imagenet, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _truncate(imagenet / "val" / "n03" / "img1.jpg")
    with pytest.raises(DatasetError, match="truncated"):
        _prepare(imagenet, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_write_error_leaves_no_partial_array(imagenet: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(*args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full_disk)
    with pytest.raises(OSError, match="No space left"):
        prepared_array.write_image_array(tmp_path / "a.npy", sorted(imagenet.rglob("*.jpg")), SIZE)
    assert list(tmp_path.iterdir()) == [imagenet]


def test_not_enough_disk_space_fails_before_decoding(imagenet: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(total=10**6, used=10**6 - 100, free=100))
    monkeypatch.setattr(prepared_array, "decode_image_bytes", _must_not_decode)
    with pytest.raises(DatasetError, match="needs 0.00 GiB but .* has 0.00 GiB free"):
        prepared_array.write_image_array(tmp_path / "a.npy", sorted(imagenet.rglob("*.jpg")), SIZE)
    assert list(tmp_path.iterdir()) == [imagenet]


def _must_not_decode(data: bytes, size: int) -> np.ndarray:
    raise AssertionError("decoded although the disk check should have failed first")


# --- checks on load -------------------------------------------------------------------------------


@pytest.fixture()
def prepared(imagenet: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    _prepare(imagenet, out)
    return out


def test_a_changed_pixel_is_a_checksum_mismatch(prepared: Path) -> None:
    path = prepared / "train.npy"
    data = bytearray(path.read_bytes())
    data[-5] ^= 1
    path.write_bytes(bytes(data))
    images = load_split(prepared, "train")  # labels alone need no pixel read
    assert len(images.labels) == 15
    with pytest.raises(ArtifactError, match="checksum mismatch in 1 of 1 blocks") as caught:
        images.get_batch([0])
    assert str(path) in str(caught.value) and "dvc checkout" in str(caught.value)


def test_verified_once_per_file_and_pickled_without_pixels(prepared: Path) -> None:
    first = load_split(prepared, "train")
    first.get_batch([0])
    again = load_split(prepared, "train")
    assert again.verified  # the same file, unchanged: no second read
    copy = pickle.loads(pickle.dumps(again))
    assert len(pickle.dumps(again)) < 10_000 and torch.equal(copy.get_batch([1, 2]), first.get_batch([1, 2]))
    path = prepared / "train.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    (prepared / "new.npy").write_bytes(bytes(data))
    os.replace(prepared / "new.npy", path)  # as a checkout replaces it: another file, checked again
    with pytest.raises(ArtifactError, match="checksum mismatch"):
        load_split(prepared, "train").get_batch([0])


def test_a_truncated_array_fails_on_open(prepared: Path) -> None:
    path = prepared / "test.npy"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ArtifactError, match="truncated") as caught:
        load_split(prepared, "test")
    assert str(path) in str(caught.value)


def test_an_edited_index_is_a_checksum_mismatch(prepared: Path) -> None:
    index = prepared / "train.csv"
    index.write_text(index.read_text().replace(",0,", ",1,", 1))
    with pytest.raises(ArtifactError, match="index_md5") as caught:
        load_split(prepared, "train")
    assert str(index) in str(caught.value)


def test_missing_block_checksums_are_an_error(prepared: Path) -> None:
    meta = json.loads((prepared / "meta.json").read_text())
    meta["arrays"]["train"]["chunk_md5"] = []
    (prepared / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="0 block checksums, 1 expected"):
        load_split(prepared, "train")

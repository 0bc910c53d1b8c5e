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
from dssl.data import batches, prepared_array
from dssl.data.datasets import DATASETS, DatasetError, load_split
from dssl.cli import main as dssl
from dssl.data import imageset
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


def test_checked_once_per_file_and_pickled_without_pixels(prepared: Path) -> None:
    first = load_split(prepared, "train")
    first.get_batch([0])
    again = load_split(prepared, "train")
    assert again.spot_checked and not again.verified  # the same file, unchanged: no second read
    copy = pickle.loads(pickle.dumps(again))
    assert len(pickle.dumps(again)) < 10_000 and torch.equal(copy.get_batch([1, 2]), first.get_batch([1, 2]))
    path = prepared / "train.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    (prepared / "new.npy").write_bytes(bytes(data))
    os.replace(prepared / "new.npy", path)  # as a checkout replaces it: another file, checked again
    with pytest.raises(ArtifactError, match="checksum mismatch"):
        load_split(prepared, "train").get_batch([0])


def _blocks_array(imagenet: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """A prepared train split of 15 images in 4 blocks of 4 (the last of 3)."""
    out = tmp_path / "blocks"
    _prepare(imagenet, out)
    files = [imagenet / line.split(",")[0] for line in (out / "train.csv").read_text().splitlines()[1:]]
    written = prepared_array.write_image_array(tmp_path / "train.npy", files, SIZE, chunk_images=4)
    os.replace(tmp_path / "train.npy", out / "train.npy")
    meta = json.loads((out / "meta.json").read_text())
    meta["arrays"]["train"].update(chunk_images=4, chunk_md5=written.chunk_md5)
    (out / "meta.json").write_text(json.dumps(meta))
    return out, written.chunk_md5


def test_a_reader_hashes_only_the_end_blocks_and_dssl_verify_every_block(
        imagenet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A reading process does not hash the whole array (187 GiB at ImageNet scale): it compares the first and
    last blocks; `dssl verify` compares every block, and finds a damaged middle block (exit 2, one line)."""
    out, _ = _blocks_array(imagenet, tmp_path)
    hashed: list[list[int]] = []
    real = imageset._block_md5s
    monkeypatch.setattr(imageset, "_block_md5s", lambda *a, **k: hashed.append(list(a[3])) or real(*a, **k))
    images = load_split(out, "train")
    images.get_batch([5, 6])
    images.get_batch([1])
    assert hashed == [[0, 3]]
    path = out / "train.npy"
    data = bytearray(path.read_bytes())
    data[np.load(path, mmap_mode="r").offset + 5 * 3 * SIZE * SIZE] ^= 1   # image 5: the second block
    (out / "new.npy").write_bytes(bytes(data))
    os.replace(out / "new.npy", path)
    assert load_split(out, "train").get_batch([5]).shape == (1, 3, SIZE, SIZE)   # the end blocks are intact
    assert dssl(["verify", str(out), "--split", "test"]) == 0
    assert "test: 1 block(s)" in capsys.readouterr().out
    assert dssl(["verify", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and str(path) in error
    assert "checksum mismatch in 1 of 4 blocks checked" in error and "images 4..7" in error


def test_dssl_verify_refuses_a_dataset_without_block_checksums(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "meta.json").write_text(json.dumps({"format": "arrays", "splits": ["train"]}))
    assert dssl(["verify", str(tmp_path)]) == 2
    assert "no block checksums" in capsys.readouterr().err
    assert dssl(["verify", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("threads", [2, 3])
def test_gathered_by_several_threads_as_by_one(imagenet: Path, tmp_path: Path, threads: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = _blocks_array(imagenet, tmp_path)
    serial = load_split(out, "train")
    serial.gather_threads = 1
    parallel = load_split(out, "train")
    parallel.gather_threads = threads
    monkeypatch.setattr(imageset, "PARALLEL_GATHER_BYTES", 0)   # these 16 px batches would be copied by one
    indices = np.array([14, 3, 3, 0, 9, 7, 12, 1])
    expected = serial.get_batch(indices)
    assert torch.equal(parallel.get_batch(indices), expected)
    buffer = np.empty((len(indices), 3, SIZE, SIZE), np.uint8)   # e.g. a pinned host buffer's numpy view
    batch = parallel.get_batch(indices, out=buffer)
    assert np.shares_memory(batch.numpy(), buffer) and torch.equal(batch, expected)
    assert torch.equal(parallel.get_batch(indices[:1]), expected[:1])   # fewer rows than threads


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


# --- reading batches (dssl.data.batches) -----------------------------------------------------------


def _decoded(root: Path, prepared: Path, split: str) -> np.ndarray:
    """Every image of ``split`` decoded from its source JPEG by the resize rule, in index order."""
    rows = (prepared / f"{split}.csv").read_text().splitlines()[1:]
    return np.stack([_expected(root / line.split(",")[0]) for line in rows])


def _epoch_indices(seed: int, count: int, batch_size: int, epochs: int) -> list[list[np.ndarray]]:
    generator = torch.Generator().manual_seed(seed)
    return [batches.epoch_batches(np.arange(count), batch_size, generator) for _ in range(epochs)]


@pytest.fixture(params=[False, True], ids=["fresh", "pooled"])
def pooled(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both output paths: these 16 px batches allocated afresh, or taken from the pool as 224 px ones are."""
    if request.param:
        monkeypatch.setattr(batches, "SMALL_BATCH_BYTES", 0)
    return request.param


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_batches_equal_the_decoded_images(imagenet: Path, prepared: Path, workers: int, pooled: bool) -> None:
    images = load_split(prepared, "train")
    decoded = _decoded(imagenet, prepared, "train")
    loader = batches.ShuffledBatches(images, 4, torch.Generator().manual_seed(3), workers=workers)
    expected = _epoch_indices(3, len(images), 4, epochs=2)
    for epoch in expected:
        seen = list(loader)
        assert [len(b) for b, _ in seen] == [4, 4, 4, 3]  # the last partial batch is kept, as a DataLoader
        for indices, (pixels, labels) in zip(epoch, seen):
            assert pixels.dtype == torch.uint8
            np.testing.assert_array_equal(pixels.numpy(), decoded[indices])
            np.testing.assert_array_equal(labels.numpy(), images.labels[indices])


@pytest.mark.parametrize("workers", [0, 2])
def test_normalised_batches_equal_the_torchvision_reference(prepared: Path, workers: int, pooled: bool) -> None:
    images = load_split(prepared, "train")
    norm = batches.Normalisation(batches.IMAGENET_MEAN, batches.IMAGENET_STD)
    loader = batches.ShuffledBatches(images, 6, torch.Generator().manual_seed(1), normalisation=norm,
                                     workers=workers)
    mean = torch.tensor(batches.IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(batches.IMAGENET_STD).view(1, 3, 1, 1)
    for indices, (floats, _) in zip(_epoch_indices(1, len(images), 6, epochs=1)[0], loader):
        reference = (images.get_batch(indices).float() / 255 - mean) / std  # ToTensor, then Normalize
        assert floats.dtype == torch.float32
        torch.testing.assert_close(floats, reference, rtol=0, atol=2e-6)


def test_unit_range_is_bit_identical_to_the_training_conversion(prepared: Path) -> None:
    images = load_split(prepared, "train")
    indices = np.array([14, 0, 7, 7, 3])
    out = torch.empty(len(indices), 3, SIZE, SIZE)
    batches.UNIT_RANGE.apply(images.get_batch(indices), out)
    assert torch.equal(out, images.get_batch(indices).float().div_(255.0))


def test_one_value_normalises_every_channel_and_bad_shapes_are_refused() -> None:
    pixels = torch.randint(0, 256, (2, 1, 5, 5), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    grey = batches.Normalisation((0.5,), (0.25,)).apply(pixels, torch.full(pixels.shape, float("nan")))
    torch.testing.assert_close(grey, (pixels.float() / 255 - 0.5) / 0.25, rtol=0, atol=2e-6)
    with pytest.raises(ValueError, match="C = 3 channels"):
        batches.Normalisation(batches.IMAGENET_MEAN, batches.IMAGENET_STD).apply(pixels, torch.empty(pixels.shape))
    with pytest.raises(ValueError, match="positive std"):
        batches.Normalisation((0.5, 0.5), (0.25, 0.0))


def test_shuffling_is_a_fresh_permutation_per_epoch() -> None:
    epochs = _epoch_indices(5, 15, 4, epochs=3)
    orders = [np.concatenate(epoch) for epoch in epochs]
    assert all(sorted(order) == list(range(15)) for order in orders)
    assert not np.array_equal(orders[0], orders[1]) and not np.array_equal(orders[1], orders[2])
    assert all(np.array_equal(a, b) for a, b in zip(orders, map(np.concatenate, _epoch_indices(5, 15, 4, 3))))
    # One torch.randperm per epoch, as the local training loop draws (and a DataLoader's RandomSampler).
    generator = torch.Generator().manual_seed(5)
    subset = np.array([20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34])
    for order in orders:
        drawn = batches.epoch_batches(subset, 4, generator)
        assert np.array_equal(np.concatenate(drawn), subset[order])
    dropped = batches.epoch_batches(np.arange(15), 4, torch.Generator(), drop_last=True)
    assert [len(b) for b in dropped] == [4, 4, 4]


@pytest.mark.parametrize("pooled", [True], indirect=True)
def test_kept_batches_stay_valid_and_released_buffers_are_reused(prepared: Path, pooled: bool) -> None:
    images = load_split(prepared, "train")
    norm = batches.Normalisation(batches.IMAGENET_MEAN, batches.IMAGENET_STD)
    loader = batches.ShuffledBatches(images, 2, torch.Generator().manual_seed(0), normalisation=norm, workers=2)
    kept = [floats for floats, _ in loader]  # every batch held at once: the pool must not overwrite any
    reference = [norm.apply(images.get_batch(i), torch.empty(len(i), 3, SIZE, SIZE))
                 for i in _epoch_indices(0, 15, 2, epochs=1)[0]]
    assert len(kept) == 8 and all(torch.equal(a, b) for a, b in zip(kept, reference))
    views = [kept[0][0], kept[1][:, 1]]  # views (and autograd's saved tensors) keep the storage alive
    del kept, reference
    storages = set()
    for floats, _ in loader:  # batches dropped as they go: the same few arrays come back
        storages.add(floats.untyped_storage().data_ptr())
    assert len(storages) <= batches.pool_size(2) - 2
    assert all(v.untyped_storage().data_ptr() not in storages for v in views)


def test_get_batch_into_a_buffer_reads_in_file_order_and_keeps_batch_order(prepared: Path) -> None:
    images = load_split(prepared, "train")
    indices = np.array([9, 2, 14, 2, 0])
    buffer = np.empty((5, 3, SIZE, SIZE), np.uint8)
    batch = images.get_batch(indices, out=buffer)
    assert np.shares_memory(batch.numpy(), buffer) and torch.equal(batch, images.get_batch(indices))
    with pytest.raises(ValueError, match=r"out must be uint8 \[5, 3, 16, 16\]"):
        images.get_batch(indices, out=np.empty((4, 3, SIZE, SIZE), np.uint8))


def test_a_damaged_array_fails_the_same_way_through_the_reader_threads(prepared: Path) -> None:
    path = prepared / "train.npy"
    data = bytearray(path.read_bytes())
    data[-5] ^= 1
    path.write_bytes(bytes(data))
    loader = batches.ShuffledBatches(load_split(prepared, "train"), 4, torch.Generator(), workers=2)
    with pytest.raises(ArtifactError, match="checksum mismatch in 1 of 1 blocks"):
        next(iter(loader))

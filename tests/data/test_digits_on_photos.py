"""digits_on_photos: scikit-learn's digits blended onto crops of its colour photographs as
|photo_crop - digit| (Ganin et al., 2016): shapes, labels, provenance, split, determinism, params."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from dssl.config.params import read_params, validate
from dssl.data.dataset_specs import DATASET_SPECS
from dssl.data.datasets import DATASETS, DatasetError, load_split
from dssl.data.prepared_format import load_provenance
from dssl.data.photo_digits import bilinear_weights, load_photos, upscale_digits

REPO = Path(__file__).resolve().parents[2]
ENTRY = DATASETS["digits_on_photos"]

# md5 of train.npz for the default spec. A change here means every machine's prepared data changes:
# only update it together with the code change that explains it.
DEFAULT_TRAIN_MD5 = "3c75d215c604617e145cd8e0c6b6b35e"
# md5 of the decoded pixels of scikit-learn's photographs: if these differ, the JPEG decoder (Pillow's
# libjpeg) differs from the one the md5 above was computed with, and so will the prepared bytes.
PHOTO_PIXELS_MD5 = {"china.jpg": "81aa95e2b220ce2959edcc5bd7a7a8e4",
                    "flower.jpg": "350830d869026f10813e782130de4d00"}


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def arrays(folder: Path, split: str) -> dict[str, np.ndarray]:
    with np.load(folder / f"{split}.npz") as archive:
        return {name: archive[name] for name in archive.files}


@pytest.fixture(scope="module")
def default_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("digits_on_photos")
    ENTRY.prepare({}, out)
    return out


@pytest.fixture(scope="module")
def triple_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("digits_on_photos_x3")
    ENTRY.prepare({"composites_per_digit": 3}, out)
    return out


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    return load_digits()


# --- layout and contents ---------------------------------------------------------------------------


def test_shapes_dtypes_and_meta(default_dir: Path) -> None:
    meta = json.loads((default_dir / "meta.json").read_text())
    assert meta["format"] == "arrays" and meta["num_classes"] == 10
    assert meta["sizes"] == {"train": 1347, "test": 450}
    assert meta["image_shape"] == [3, 24, 24]
    assert meta["spec"] == {"image_size": 24, "composites_per_digit": 1, "test_fraction": 0.25,
                            "split_seed": 0, "seed": 0}
    assert [photo["name"] for photo in meta["composition"]["photos"]] == ["china.jpg", "flower.jpg"]
    train = arrays(default_dir, "train")
    assert train["images"].dtype == np.uint8 and train["images"].shape == (1347, 24, 24, 3)
    assert train["labels"].dtype == np.int64 and train["labels"].shape == (1347,)
    for name in ("source", "photo"):
        assert train[name].dtype == np.int64 and train[name].shape == (1347,)
    assert train["crop"].shape == (1347, 2)


def test_load_split_keeps_its_contract(default_dir: Path) -> None:
    images = load_split(default_dir, "train")
    assert images.image_shape == (3, 24, 24) and len(images) == 1347
    batch = images.get_batch([0, 5])
    assert tuple(batch.shape) == (2, 3, 24, 24) and str(batch.dtype) == "torch.uint8"
    stored = arrays(default_dir, "train")
    assert np.array_equal(batch.numpy(), stored["images"][[0, 5]].transpose(0, 3, 1, 2))
    assert set(load_provenance(default_dir, "test")) == {"source", "photo", "crop"}


def test_digits_have_no_provenance_arrays(tmp_path: Path) -> None:
    DATASETS["digits"].prepare({}, tmp_path)
    assert load_provenance(tmp_path, "train") == {}


def test_labels_are_those_of_the_source_digits(default_dir: Path, digits) -> None:
    for split in ("train", "test"):
        stored = arrays(default_dir, split)
        assert np.array_equal(stored["labels"], digits.target[stored["source"]])


def test_train_and_test_hold_disjoint_source_digits(default_dir: Path) -> None:
    train, test = arrays(default_dir, "train")["source"], arrays(default_dir, "test")["source"]
    assert not set(train.tolist()) & set(test.tolist())
    assert sorted(train.tolist() + test.tolist()) == list(range(1797))


def test_same_source_split_as_digits(default_dir: Path, tmp_path: Path, digits) -> None:
    """Equal test_fraction and split_seed put the same digits into test as the digits dataset."""
    DATASETS["digits"].prepare({}, tmp_path)
    plain = arrays(tmp_path, "test")["images"][..., 0]
    levels = digits.images.astype(np.int64)[arrays(default_dir, "test")["source"]]
    assert np.array_equal(upscale_digits(levels, 8), plain)


# --- the photographs are really used ------------------------------------------------------------------


def test_composites_are_the_absolute_difference_of_crop_and_digit(default_dir: Path, digits) -> None:
    photos = load_photos()
    stored = arrays(default_dir, "train")
    strokes = upscale_digits(digits.images.astype(np.int64), 24)
    for n in range(0, 1347, 97):
        (top, left), photo = stored["crop"][n], photos.images[stored["photo"][n]]
        crop = photo[top:top + 24, left:left + 24].astype(np.int16)
        expected = np.abs(crop - strokes[stored["source"][n]].astype(np.int16)[..., None])
        assert np.array_equal(stored["images"][n], expected)


def test_composites_differ_from_the_digit_and_follow_the_photo(default_dir: Path, digits) -> None:
    photos = load_photos()
    stored = arrays(default_dir, "train")
    strokes = upscale_digits(digits.images.astype(np.int64), 24)
    alone = np.repeat(strokes[stored["source"]][..., None], 3, axis=3)
    assert (stored["images"] != alone).mean() > 0.9
    crops = np.stack([photos.images[p][top:top + 24, left:left + 24]
                      for p, (top, left) in zip(stored["photo"], stored["crop"])])
    # Background pixels are the crop itself (the digit is 0 there), so an image's colour follows its
    # crop's: per channel, the mean over each image correlates strongly across images.
    for channel in range(3):
        crop_means = crops[..., channel].mean(axis=(1, 2))
        composite_means = stored["images"][..., channel].mean(axis=(1, 2))
        assert np.corrcoef(crop_means, composite_means)[0, 1] > 0.8


def test_both_photographs_appear_in_both_splits(default_dir: Path) -> None:
    for split in ("train", "test"):
        counts = np.bincount(arrays(default_dir, split)["photo"], minlength=2)
        assert counts.min() > 0.3 * counts.sum()


def test_crops_lie_inside_their_photograph(default_dir: Path) -> None:
    stored = arrays(default_dir, "train")
    heights = np.array([image.shape[0] for image in load_photos().images])
    widths = np.array([image.shape[1] for image in load_photos().images])
    assert stored["crop"].min() >= 0
    assert (stored["crop"][:, 0] + 24 <= heights[stored["photo"]]).all()
    assert (stored["crop"][:, 1] + 24 <= widths[stored["photo"]]).all()


# --- composites per digit ---------------------------------------------------------------------------


def test_three_composites_per_digit_triple_the_training_set(default_dir: Path, triple_dir: Path) -> None:
    meta = json.loads((triple_dir / "meta.json").read_text())
    assert meta["sizes"] == {"train": 3 * 1347, "test": 450}
    assert ENTRY.train_size({"composites_per_digit": 3}) == 3 * 1347
    assert DATASET_SPECS["digits_on_photos"].train_size({"composites_per_digit": 3}) == 3 * 1347
    one, three = arrays(default_dir, "train"), arrays(triple_dir, "train")
    assert np.bincount(three["source"], minlength=1797).max() == 3
    assert set(three["source"].tolist()) == set(one["source"].tolist())
    for name in one:  # copy 0 comes first and is the single-composite training set
        assert np.array_equal(three[name][:1347], one[name])
    assert np.array_equal(arrays(triple_dir, "test")["images"], arrays(default_dir, "test")["images"])


def test_copies_of_a_digit_sit_on_different_crops(triple_dir: Path) -> None:
    stored = arrays(triple_dir, "train")
    crops = np.concatenate([stored["photo"][:, None], stored["crop"]], axis=1).reshape(3, 1347, 3)
    assert (crops[0] != crops[1]).any(axis=1).all() and (crops[1] != crops[2]).any(axis=1).all()
    assert (stored["images"][:1347] != stored["images"][1347:2694]).any(axis=(1, 2, 3)).all()


# --- determinism ---------------------------------------------------------------------------------


def test_default_train_bytes_are_pinned(default_dir: Path) -> None:
    photos = load_photos()
    decoded = {name: hashlib.md5(image.tobytes()).hexdigest() for name, image in zip(photos.names, photos.images)}
    assert decoded == PHOTO_PIXELS_MD5, "the JPEG decoder gives other pixels: prepared bytes will differ"
    assert md5(default_dir / "train.npz") == DEFAULT_TRAIN_MD5


def test_same_seed_same_bytes(default_dir: Path, tmp_path: Path) -> None:
    ENTRY.prepare({}, tmp_path)
    for name in ("train.npz", "test.npz", "meta.json"):
        assert (tmp_path / name).read_bytes() == (default_dir / name).read_bytes()


def test_another_seed_redraws_the_crops_only(default_dir: Path, tmp_path: Path) -> None:
    ENTRY.prepare({"seed": 1}, tmp_path)
    before, after = arrays(default_dir, "train"), arrays(tmp_path, "train")
    assert np.array_equal(before["source"], after["source"])
    assert np.array_equal(before["labels"], after["labels"])
    assert not np.array_equal(before["crop"], after["crop"])
    assert (before["images"] != after["images"]).any(axis=(1, 2, 3)).mean() > 0.99


def test_another_split_seed_moves_digits_keeping_their_composites(default_dir: Path, tmp_path: Path) -> None:
    ENTRY.prepare({"split_seed": 1}, tmp_path)
    before, after = arrays(default_dir, "train"), arrays(tmp_path, "train")
    assert set(before["source"].tolist()) != set(after["source"].tolist())
    shared = np.intersect1d(before["source"], after["source"])
    pick = lambda stored: stored["images"][np.searchsorted(stored["source"], shared)]  # noqa: E731
    assert np.array_equal(pick(before), pick(after))  # a digit's composite depends on `seed` alone


# --- integer upscaling ------------------------------------------------------------------------------


def test_upscaling_is_exact_bilinear(digits) -> None:
    import torch
    import torch.nn.functional as F

    levels = digits.images.astype(np.int64)[:50]
    assert np.array_equal(upscale_digits(levels, 8), ((levels * 255 + 8) // 16).astype(np.uint8))
    for size in (13, 24, 28):
        assert (bilinear_weights(8, size).sum(axis=1) == 2 * size).all()
        reference = F.interpolate(torch.tensor(levels * 255 / 16, dtype=torch.float64)[:, None],
                                  size=(size, size), mode="bilinear", align_corners=False)[:, 0].numpy()
        assert np.abs(upscale_digits(levels, size) - reference).max() <= 0.5 + 1e-9


# --- params ---------------------------------------------------------------------------------------


@pytest.fixture
def params() -> dict:
    params = read_params(REPO / "params.yaml")
    params["datasets"]["digits_on_photos"] = {"image_size": 24, "composites_per_digit": 1,
                                              "test_fraction": 0.25, "split_seed": 0, "seed": 0}
    return params


def dataset_problems(params: dict) -> dict[str, str]:
    return {p.path: p.message for p in validate(params, REPO) if p.path.startswith("datasets.")}


def test_a_full_spec_is_valid(params: dict) -> None:
    assert dataset_problems(params) == {}
    params["datasets"]["digits_on_photos"] = None  # all defaults
    assert dataset_problems(params) == {}


@pytest.mark.parametrize("key, value, message", [
    ("colour", True, "unknown key"),
    ("image_size", 7, "must be >= 8, got 7"),
    ("image_size", 24.5, "must be an integer, got 24.5"),
    ("composites_per_digit", 0, "must be >= 1, got 0"),
    ("composites_per_digit", "3", "must be an integer, got '3'"),
    ("seed", -1, "must be >= 0, got -1"),
    ("test_fraction", 0.95, "must be <= 0.9, got 0.95"),
])
def test_bad_params_are_reported(params: dict, key: str, value: object, message: str) -> None:
    bad = copy.deepcopy(params)
    bad["datasets"]["digits_on_photos"][key] = value
    assert dataset_problems(bad) == {f"datasets.digits_on_photos.{key}": message}


def test_builder_rejects_what_cannot_be_built(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="unknown key"):
        ENTRY.prepare({"photos": 3}, tmp_path)
    with pytest.raises(DatasetError, match="image_size must be an integer in 8..427"):
        ENTRY.prepare({"image_size": 428}, tmp_path)
    with pytest.raises(DatasetError, match="composites_per_digit must be an integer >= 1"):
        ENTRY.prepare({"composites_per_digit": 0}, tmp_path)

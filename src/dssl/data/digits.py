"""The offline datasets built from scikit-learn's handwritten digits: ``digits`` and ``digits_on_photos``.

- ``digits``: the 1797 8x8 digits (UCI optical recognition of handwritten digits), the embedded
  profile's data: they ship inside scikit-learn, so the pipeline runs with no network.
- ``digits_on_photos``: those digits blended onto crops of the two colour photographs scikit-learn ships,
  as MNIST-M does with MNIST (Ganin et al., 2016; builder: ``dssl.data.photo_digits``).
Both are written in the prepared ``arrays`` format (``dssl.data.prepared_format``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dssl.data import photo_digits
from dssl.data.imageset import DatasetError, save_arrays
from dssl.data.prepared_format import array_meta, save_splits
from dssl.data.dataset_specs import DIGITS_IMAGES
from dssl.data.splits import carved_sizes, stratified_split

DIGIT_VIEWS = {"flip_p": 0.0}  # see dssl.data.datasets.DatasetEntry.view_hparams


def _digit_levels(digits: Any) -> np.ndarray:
    """scikit-learn's digits as int64 ``[N, 8, 8]`` intensities 0..16 (checked, so later integer
    arithmetic on them is exact)."""
    levels = digits.images.astype(np.int64)
    if not np.array_equal(levels, digits.images) or levels.min() < 0 or levels.max() > 16:
        raise DatasetError("scikit-learn's digits are expected to hold integer intensities 0..16")
    return levels


def prepare_digits(spec: dict, out_dir: Path) -> dict:
    """The 8x8 digits as uint8 images with a stratified train/test split (``test_fraction``, ``split_seed``)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    # 8x8 intensities 0..16 -> 0..255, so every dataset shares the uint8 image convention. Integer
    # arithmetic (round half up; the only half, 8 * 255 / 16 = 127.5, went up under numpy's rounding
    # too), so no pixel hinges on a float rounding.
    levels = _digit_levels(digits)
    images = ((levels * 255 + 8) // 16).astype(np.uint8)[..., None]
    labels = digits.target.astype(np.int64)
    train, test = stratified_split(labels, spec["test_fraction"], spec["split_seed"])
    splits = {"train": (images[train], labels[train]), "test": (images[test], labels[test])}
    save_splits(out_dir, splits)
    meta = array_meta("sklearn.datasets.load_digits (UCI optical recognition of handwritten digits)",
                      [str(name) for name in digits.target_names], splits)
    meta["split"] = {"method": "stratified", "test_fraction": spec["test_fraction"],
                     "seed": spec["split_seed"]}
    return meta


def digits_sizes(spec: dict) -> dict[str, int]:
    """Images per split of ``digits``, known without loading them."""
    return carved_sizes(DIGITS_IMAGES, spec["test_fraction"])


def _check_photo_spec(spec: dict, photos: photo_digits.Photos) -> None:
    size, copies = spec["image_size"], spec["composites_per_digit"]
    if isinstance(size, bool) or not isinstance(size, int) or not 8 <= size <= photos.smallest_side:
        raise DatasetError(f"datasets.digits_on_photos.image_size must be an integer in "
                           f"8..{photos.smallest_side} (the photographs' smaller side), got {size!r}")
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise DatasetError(f"datasets.digits_on_photos.composites_per_digit must be an integer >= 1, "
                           f"got {copies!r}")


def prepare_digits_on_photos(spec: dict, out_dir: Path) -> dict:
    """Digits blended onto crops of scikit-learn's colour photographs (Ganin et al., 2016, MNIST-M).

    The train/test split is made on the source digits, with the same stratified split (and so the
    same digits) as ``digits`` for equal ``test_fraction`` and ``split_seed``: no digit reaches both
    splits through different composites. Each training digit yields ``composites_per_digit``
    composites (stored copy by copy: the first ``n_train`` images are copy 0), each test digit one
    (copy 0), so test results stay comparable whatever the number of training copies. ``seed`` drives
    the crops alone, so backgrounds can be redrawn with the labelled split held fixed.
    """
    from sklearn.datasets import load_digits

    digits, photos = load_digits(), photo_digits.load_photos()
    _check_photo_spec(spec, photos)
    levels, labels = _digit_levels(digits), digits.target.astype(np.int64)
    strokes = photo_digits.upscale_digits(levels, spec["image_size"])
    rng = np.random.default_rng(spec["seed"])
    copies = [photo_digits.composites_of_copy(strokes, photos, rng) for _ in range(spec["composites_per_digit"])]
    train, test = stratified_split(labels, spec["test_fraction"], spec["split_seed"])
    arrays = {"train": _photo_split(copies, train, labels), "test": _photo_split(copies[:1], test, labels)}
    for split, split_arrays in arrays.items():
        save_arrays(out_dir / f"{split}.npz", **split_arrays)
    meta = array_meta(
        "sklearn.datasets.load_digits on crops of sklearn.datasets.load_sample_images (china.jpg, flower.jpg)",
        [str(name) for name in digits.target_names],
        {split: (a["images"], a["labels"]) for split, a in arrays.items()})
    meta["split"] = {"method": "stratified on source digits", "test_fraction": spec["test_fraction"],
                     "seed": spec["split_seed"]}
    meta["composition"] = _composition_meta(spec, photos)
    return meta


def _photo_split(copies: list[tuple[np.ndarray, photo_digits.Crops]], positions: np.ndarray,
                 labels: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays of one split: the composites of the digits at ``positions``, copy after copy."""
    def stack(values: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([v[positions] for v in values])

    return {
        "images": stack([images for images, _ in copies]),
        "labels": stack([labels] * len(copies)),
        "source": stack([np.arange(len(labels), dtype=np.int64)] * len(copies)),
        "photo": stack([crops.photo for _, crops in copies]),
        "crop": stack([np.stack([crops.top, crops.left], axis=1) for _, crops in copies]),
    }


def _composition_meta(spec: dict, photos: photo_digits.Photos) -> dict:
    return {
        "method": "|photo_crop - digit| per channel (Ganin et al., 2016)",
        "upscale": f"8x8 -> {spec['image_size']}x{spec['image_size']}, bilinear in integer arithmetic",
        "composites_per_digit": {"train": spec["composites_per_digit"], "test": 1},
        "crop_seed": spec["seed"],
        "photos": photo_digits.photo_fingerprints(photos),
    }


def digits_on_photos_sizes(spec: dict) -> dict[str, int]:
    """Images per split of ``digits_on_photos``, known without building them."""
    sizes = carved_sizes(DIGITS_IMAGES, spec["test_fraction"])
    return {**sizes, "train": sizes["train"] * spec["composites_per_digit"]}  # test: one composite per digit

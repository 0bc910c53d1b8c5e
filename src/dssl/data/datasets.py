"""Datasets of the pipeline (registry ``DATASETS``) and their prepared on-disk form.

The registry keys are the dataset names of ``params.yaml``. Each entry turns a spec into a prepared
folder (the body of the ``prepare@<dataset>`` stage) and reports its training-split size without
loading data, for parameter validation.

Which data the papers use:
- Paper A (FedMAR/DecMAR, ICLR 2026) pretrains on Mini-ImageNet and fine-tunes on CIFAR-10,
  CIFAR-100 and ImageNet; paper B (FedEMA, ICLR 2022) trains and evaluates on CIFAR-10/100.
- The embedded profile uses scikit-learn's handwritten digits, which ship inside the package, so the
  pipeline runs with no network.
- ``digits_on_photos`` (also offline) blends those digits onto crops of the two colour photographs
  scikit-learn ships, as MNIST-M does with MNIST (Ganin et al., 2016): raw pixels separate its classes
  poorly, so what pretraining learns shows in the evaluation (builder: ``dssl.data.photo_digits``).

Prepared folder (``data/prepared/<dataset>/``):
- ``meta.json``: name, source, format, classes, sizes per split, image shape ``[C, H, W]``, resolved spec.
- ``format == "arrays"``: ``<split>.npz`` with ``images`` (uint8 ``[N, H, W, C]``) and ``labels`` (int64);
  ``digits_on_photos`` adds int64 provenance arrays (``source``, ``photo``, ``crop``), which
  ``load_split`` ignores and ``load_provenance`` returns.
- ``format == "memmap"`` (image folders): every image decoded once, at ``image_size``, into
  ``<split>.npy`` (uint8 ``[N, C, H, W]``, read memory-mapped; see ``dssl.data.prepared_array`` for the
  layout and resize rule) and ``<split>.csv`` with ``path,label,bytes,md5`` rows, the source file of
  each image (paths relative to ``root``). ``meta.json`` adds ``resize``, ``layout``, ``folder_layout``
  (which of ``dssl.data.layouts`` the folder had) and, per split, ``arrays.<split>``: the file names,
  shape, the index's md5 and the md5 of every block of ``chunk_images`` images, checked on load.
  Epochs never read the source images.
Every dataset has the splits ``train`` and ``test``, except Mini-ImageNet: a pretraining set (paper A
evaluates on CIFAR and ImageNet), it keeps every image in ``train`` unless ``test_fraction`` carves a
test split or its folder is a split of the images with a ``test/`` (it may add ``val`` then).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import shutil
import urllib.error
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from dssl.artifacts import ArtifactError, check_keys, read_json, require_file
from dssl.data import photo_digits, prepared_array
from dssl.data.layouts import IMAGE_EXTENSIONS, LayoutProblem, class_folders, detect_layout, is_image, layout_help
from dssl.data.imageset import (
    ArrayImageSet,
    DatasetError,
    ImageSet,
    MemmapImageSet,
    load_arrays,
    save_arrays,
)

__all__ = ["ArtifactError", "DATASETS", "DatasetEntry", "DatasetError", "ImageSet", "load_provenance",
           "load_split", "write_json"]

DIGITS_SIZE = 1797  # images in scikit-learn's load_digits
DIGIT_VIEWS = {"flip_p": 0.0}  # see DatasetEntry.view_hparams


@dataclass(frozen=True)
class DatasetEntry:
    """One dataset: its accepted spec keys with defaults, how to prepare it, its split sizes."""

    name: str
    description: str
    defaults: Mapping[str, Any]
    build: Callable[[dict, Path], dict]
    # Images per split, known without decoding (None when the data folder is not there to count).
    size_of_splits: Callable[[dict], dict[str, int] | None]
    # [C, H, W] of the prepared images (the pipeline resizes them to pretrain.image_size as it reads them).
    prepared_shape: Callable[[dict], tuple[int, int, int]] = lambda spec: (3, spec["image_size"], spec["image_size"])
    # Images per split as published, for planning a run before the data is in place.
    published_sizes: Callable[[dict], dict[str, int]] | None = None
    # SSL view hyper-parameters this dataset's images call for (a model's own hparams override them).
    # Digits: a mirrored digit is another symbol (or none), so no horizontal flips. The crop scale stays
    # the methods' own (0.2): 0.5 was measured no better (SimSiam + CNN on digits, 10 %-label probe minus
    # random init, 3 seeds: central 30 epochs +9.2 vs +7.3 points, FL-IID 20 rounds +3.2 vs +3.3).
    view_hparams: Mapping[str, Any] = field(default_factory=dict)

    def resolve(self, spec: Mapping[str, Any] | None) -> dict:
        """The spec with defaults filled in; an unknown key is a ``DatasetError``."""
        spec = dict(spec or {})
        unknown = sorted(set(spec) - set(self.defaults))
        if unknown:
            raise DatasetError(
                f"datasets.{self.name}: unknown key(s) {unknown}; accepted: {sorted(self.defaults)}"
            )
        return {**self.defaults, **spec}

    def prepare(self, spec: Mapping[str, Any] | None, out_dir: Path) -> dict:
        """Write the prepared form of this dataset into ``out_dir`` and return its ``meta.json`` content."""
        resolved = self.resolve(spec)
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        meta = {"name": self.name, "spec": resolved, **self.build(resolved, out_dir)}
        write_json(out_dir / "meta.json", meta)
        return meta

    def train_size(self, spec: Mapping[str, Any] | None) -> int | None:
        """Training-split size without loading images (None when the data folder is not there)."""
        sizes = self.split_sizes(spec)
        return None if sizes is None else sizes["train"]

    def split_sizes(self, spec: Mapping[str, Any] | None) -> dict[str, int] | None:
        """Images per split without loading them (None when the data folder is not there)."""
        return self.size_of_splits(self.resolve(spec))

    def image_shape(self, spec: Mapping[str, Any] | None) -> tuple[int, int, int]:
        """``[C, H, W]`` of the prepared images."""
        return self.prepared_shape(self.resolve(spec))

    def planned_sizes(self, spec: Mapping[str, Any] | None) -> tuple[dict[str, int], bool]:
        """Images per split and whether they were counted (True) or are the published sizes (False)."""
        counted = self.split_sizes(spec)
        if counted is not None or self.published_sizes is None:
            return counted or {}, counted is not None
        return self.published_sizes(self.resolve(spec)), False


def write_json(path: Path, obj: Any) -> None:
    """JSON with sorted keys and fixed formatting, so equal content gives equal bytes; written to a
    temporary name and renamed, so a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


META_KEYS = {"name": str, "format": str, "num_classes": int, "splits": list}


def load_split(prepared_dir: Path, split: str) -> ImageSet:
    """The ``split`` (``train``, ``test``, optionally ``val``) of a prepared dataset as an ``ImageSet``.

    A missing or damaged prepared file is an ``ArtifactError`` naming it; an unknown split is a
    ``DatasetError`` (the request is wrong, not the file).
    """
    prepared_dir = Path(prepared_dir)
    meta_path = prepared_dir / "meta.json"
    if not meta_path.exists():
        raise ArtifactError(meta_path, f"missing, so {prepared_dir} is not a prepared dataset")
    meta = read_json(meta_path, META_KEYS)
    if split not in meta["splits"]:
        raise DatasetError(f"{meta['name']} has no split '{split}'; prepared splits: {meta['splits']}")
    if meta["format"] == "arrays":
        return _array_split(prepared_dir / f"{split}.npz", meta["num_classes"])
    if meta["format"] == "memmap":
        return _memmap_split(prepared_dir, meta_path, meta, split)
    raise ArtifactError(meta_path, f"unknown format {meta['format']!r} (expected 'arrays' or 'memmap')")


def load_provenance(prepared_dir: Path, split: str) -> dict[str, np.ndarray]:
    """The per-image arrays of an ``arrays`` split beyond ``images`` and ``labels`` ({} when none).

    For ``digits_on_photos``: ``source`` (the image's digit, an index into ``load_digits``), ``photo``
    (0 = china.jpg, 1 = flower.jpg; meta.json's ``composition.photos`` in that order) and ``crop``
    (``[N, 2]`` top-left corner of the crop), e.g. for a partition of clients by photograph.
    """
    path = Path(prepared_dir) / f"{split}.npz"
    arrays = load_arrays(path, ("images", "labels"))
    extra = {name: array for name, array in arrays.items() if name not in ("images", "labels")}
    for name, array in extra.items():
        if len(array) != len(arrays["labels"]):
            raise ArtifactError(path, f"array {name!r} has {len(array)} rows for {len(arrays['labels'])} images")
    return extra


def _array_split(path: Path, num_classes: int) -> ArrayImageSet:
    arrays = load_arrays(path, ("images", "labels"))
    images, labels = arrays["images"], arrays["labels"]
    if images.dtype != np.uint8 or images.ndim != 4:
        raise ArtifactError(path, f"array 'images' should be uint8 [N, H, W, C], got {images.dtype} "
                                  f"{list(images.shape)}")
    if labels.ndim != 1 or labels.dtype.kind not in "iu" or len(labels) != len(images):
        raise ArtifactError(path, f"array 'labels' should be {len(images)} integers (one per image), got "
                                  f"{labels.dtype} {list(labels.shape)}")
    _check_labels(path, labels, num_classes)
    return ArrayImageSet(images, labels, num_classes)


def _memmap_split(prepared_dir: Path, meta_path: Path, meta: dict, split: str) -> MemmapImageSet:
    """A decoded image folder's split; its index is checked against meta.json's md5 here, the pixels
    before the first batch (``MemmapImageSet.verify``)."""
    check_keys(meta_path, meta, {"arrays": dict})
    entry = meta["arrays"].get(split)
    if not isinstance(entry, dict):
        raise ArtifactError(meta_path, f"'arrays' has no entry for the split {split!r}")
    check_keys(meta_path, entry, {"file": str, "index": str, "index_md5": str, "chunk_images": int,
                                  "chunk_md5": list})
    index = require_file(prepared_dir / entry["index"])
    if _file_md5(index) != entry["index_md5"]:
        raise ArtifactError(index, "checksum mismatch with meta.json's index_md5; the index was edited or "
                                   "damaged after the prepare stage wrote it")
    paths, labels = _read_index(index)
    _check_labels(index, labels, meta["num_classes"])
    return MemmapImageSet(prepared_dir / entry["file"], labels, meta["num_classes"], entry["chunk_images"],
                          entry["chunk_md5"])


def _check_labels(path: Path, labels: np.ndarray, num_classes: int) -> None:
    if len(labels) and not (0 <= labels.min() and labels.max() < num_classes):
        raise ArtifactError(path, f"labels outside 0..{num_classes - 1} (meta.json's num_classes)")


# --- array datasets -------------------------------------------------------------------------------


def _array_meta(source: str, classes: list[str], splits: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict:
    images = next(iter(splits.values()))[0]
    height, width, channels = images.shape[1:]
    return {
        "source": source,
        "format": "arrays",
        "num_classes": len(classes),
        "classes": classes,
        "splits": sorted(splits),
        "sizes": {split: int(len(labels)) for split, (_, labels) in splits.items()},
        "image_shape": [int(channels), int(height), int(width)],
    }


def _save_splits(out_dir: Path, splits: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    for split, (images, labels) in splits.items():
        save_arrays(out_dir / f"{split}.npz", images=images, labels=labels.astype(np.int64))


def _stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted train and test positions of a stratified split (scikit-learn's rounding: test = ceil).

    The test size is passed as an exact integer (``_test_count``), so scikit-learn never rounds a float.
    """
    from sklearn.model_selection import train_test_split

    positions = np.arange(len(labels))
    test_size = _test_count(len(labels), test_fraction)
    train, test = train_test_split(positions, test_size=test_size, random_state=seed, stratify=labels)
    return np.sort(train), np.sort(test)


def _test_count(total: int, test_fraction: float) -> int:
    """ceil(test_fraction * total) in exact arithmetic on the fraction as written (0.1 is 1/10).

    The float product can land a hair above an integer (0.1 * 30 = 3.0000000000000004) and ceil would
    then take one sample too many; a count must not hinge on the last bit of a float.
    """
    return math.ceil(Fraction(repr(float(test_fraction))) * total)


def _carved_sizes(total: int, test_fraction: float, extra: Mapping[str, int] | None = None) -> dict[str, int]:
    """Split sizes of ``total`` images of which ``test_fraction`` become the test split (none at 0)."""
    test = _test_count(total, test_fraction)
    return {"train": total - test, **({"test": test} if test else {}), **(extra or {})}


def _digit_levels(digits: Any) -> np.ndarray:
    """scikit-learn's digits as int64 ``[N, 8, 8]`` intensities 0..16 (checked, so later integer
    arithmetic on them is exact)."""
    levels = digits.images.astype(np.int64)
    if not np.array_equal(levels, digits.images) or levels.min() < 0 or levels.max() > 16:
        raise DatasetError("scikit-learn's digits are expected to hold integer intensities 0..16")
    return levels


def _prepare_digits(spec: dict, out_dir: Path) -> dict:
    from sklearn.datasets import load_digits

    digits = load_digits()
    # 8x8 intensities 0..16 -> 0..255, so every dataset shares the uint8 image convention. Integer
    # arithmetic (round half up; the only half, 8 * 255 / 16 = 127.5, went up under numpy's rounding
    # too), so no pixel hinges on a float rounding.
    levels = _digit_levels(digits)
    images = ((levels * 255 + 8) // 16).astype(np.uint8)[..., None]
    labels = digits.target.astype(np.int64)
    train, test = _stratified_split(labels, spec["test_fraction"], spec["split_seed"])
    splits = {"train": (images[train], labels[train]), "test": (images[test], labels[test])}
    _save_splits(out_dir, splits)
    meta = _array_meta("sklearn.datasets.load_digits (UCI optical recognition of handwritten digits)",
                       [str(name) for name in digits.target_names], splits)
    meta["split"] = {"method": "stratified", "test_fraction": spec["test_fraction"],
                     "seed": spec["split_seed"]}
    return meta


def _digits_sizes(spec: dict) -> dict[str, int]:
    return _carved_sizes(DIGITS_SIZE, spec["test_fraction"])


def _check_photo_spec(spec: dict, photos: photo_digits.Photos) -> None:
    size, copies = spec["image_size"], spec["composites_per_digit"]
    if isinstance(size, bool) or not isinstance(size, int) or not 8 <= size <= photos.smallest_side:
        raise DatasetError(f"datasets.digits_on_photos.image_size must be an integer in "
                           f"8..{photos.smallest_side} (the photographs' smaller side), got {size!r}")
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise DatasetError(f"datasets.digits_on_photos.composites_per_digit must be an integer >= 1, "
                           f"got {copies!r}")


def _prepare_digits_on_photos(spec: dict, out_dir: Path) -> dict:
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
    train, test = _stratified_split(labels, spec["test_fraction"], spec["split_seed"])
    arrays = {"train": _photo_split(copies, train, labels), "test": _photo_split(copies[:1], test, labels)}
    for split, split_arrays in arrays.items():
        save_arrays(out_dir / f"{split}.npz", **split_arrays)
    meta = _array_meta(
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


def _digits_on_photos_sizes(spec: dict) -> dict[str, int]:
    sizes = _carved_sizes(DIGITS_SIZE, spec["test_fraction"])
    return {**sizes, "train": sizes["train"] * spec["composites_per_digit"]}  # test: one composite per digit


def _cifar_class(name: str) -> type:
    from torchvision.datasets import CIFAR10, CIFAR100

    return {"cifar10": CIFAR10, "cifar100": CIFAR100}[name]


def _fetch_cifar(name: str, root: Path, train: bool) -> Any:
    """torchvision's CIFAR with download and md5 verification; any failure is one ``DatasetError``."""
    cls = _cifar_class(name)
    try:
        return cls(str(root), train=train, download=True)
    except (urllib.error.URLError, OSError, RuntimeError) as error:
        raise DatasetError(
            f"{name}: could not download or verify the data ({type(error).__name__}: {error}). "
            f"Without network access, download {cls.url} (md5 {cls.tgz_md5}) elsewhere and place the "
            f"file, unchanged, at {root / cls.filename}; the next run verifies and extracts it. If that "
            f"file or the folder {root / cls.base_folder} is already there, it failed the md5 check: "
            "delete it and place a fresh copy."
        ) from error


def _unverified_cifar(name: str, root: Path, train: bool) -> Any:
    """A CIFAR-format tarball that is not the official release (a subset, a rebuilt copy: the python
    version's pickled batches), read as torchvision reads CIFAR but without its md5 checks."""
    from torchvision.datasets.utils import extract_archive

    cls = _cifar_class(name)
    archive = root / cls.filename
    if not (root / cls.base_folder).is_dir():
        if not archive.is_file():
            raise DatasetError(f"{name}: no {archive} (a CIFAR-format python tarball) and no extracted "
                               f"{root / cls.base_folder}; place one of them there")
        extract_archive(str(archive), str(root))
    unchecked = type(f"Unverified{cls.__name__}", (cls,), {
        "train_list": [[file, None] for file, _ in cls.train_list],
        "test_list": [[file, None] for file, _ in cls.test_list],
        "meta": {**cls.meta, "md5": None},
    })
    try:
        return unchecked(str(root), train=train, download=False)
    except (OSError, RuntimeError, KeyError, ValueError) as error:
        raise DatasetError(f"{name}: {root / cls.base_folder} is not in CIFAR's python format "
                           f"({type(error).__name__}: {error})") from error


def _prepare_cifar(name: str, spec: dict, out_dir: Path) -> dict:
    root = Path(spec["root"])
    fetch = _fetch_cifar if spec["verify_md5"] else _unverified_cifar
    train, test = fetch(name, root, train=True), fetch(name, root, train=False)
    splits = {
        part: (np.asarray(data.data, dtype=np.uint8), np.asarray(data.targets, dtype=np.int64))
        for part, data in (("train", train), ("test", test))
    }
    _save_splits(out_dir, splits)
    cls = _cifar_class(name)
    archive = root / cls.filename
    source = (f"torchvision.datasets.{cls.__name__} ({cls.url}, md5 {cls.tgz_md5})" if spec["verify_md5"] else
              f"CIFAR-format tarball {spec['root']}/{cls.filename} (md5 "
              f"{_file_md5(archive) if archive.is_file() else 'unknown: extracted folder only'}, not verified)")
    return _array_meta(source, list(train.classes), splits)


# --- image-folder datasets ------------------------------------------------------------------------


def _folder_error(name: str, problem: str) -> DatasetError:
    extensions = "/".join(IMAGE_EXTENSIONS)
    expected = "Expected layout" if name == "imagenet" else "Accepted layouts"
    return DatasetError(f"{name}: {problem}. {expected}: {layout_help(name)}; image files {extensions} "
                        f"(any case); set datasets.{name}.root in params.yaml to that folder.")


def _class_dirs(name: str, split_dir: Path) -> list[Path]:
    if not split_dir.is_dir():
        raise _folder_error(name, f"missing folder {split_dir}")
    dirs = class_folders(split_dir)
    if not dirs:
        raise _folder_error(name, f"{split_dir} has no class folders")
    return dirs


def _scan_split(name: str, root: Path, split: str,
                classes: list[str] | None) -> tuple[list[str], list[str], np.ndarray]:
    """Classes, relative file paths and labels of ``root/split``; labels index ``classes`` (or the
    sorted class folders of this split when ``classes`` is None, as torchvision's ImageFolder does)."""
    dirs = _class_dirs(name, root / split)
    found = [d.name for d in dirs]
    classes = found if classes is None else classes
    foreign = sorted(set(found) - set(classes))
    if foreign:
        raise _folder_error(name, f"{root / split} has class folders not in train/: {foreign[:5]}")
    return (classes, *_scan_classes(name, root, dirs, classes))


def _scan_classes(name: str, root: Path, dirs: list[Path], classes: list[str]) -> tuple[list[str], np.ndarray]:
    """Relative paths (sorted within a class) and labels (indices into ``classes``) of class folders."""
    paths, labels = [], []
    for directory in dirs:
        files = sorted(p for p in directory.iterdir() if is_image(p))
        if not files:
            raise _folder_error(name, f"class folder {directory} holds no image files")
        paths += [p.relative_to(root).as_posix() for p in files]
        labels += [classes.index(directory.name)] * len(files)
    return paths, np.asarray(labels, dtype=np.int64)


def _pooled_class_dirs(name: str, root: Path, layout: str) -> list[Path]:
    """The class folders of a pooled or few-shot folder, in class-name order (the labels' order)."""
    folders = [root] if layout == "pooled" else [root / s for s in ("train", "val", "test") if (root / s).is_dir()]
    dirs = sorted((d for folder in folders for d in _class_dirs(name, folder)), key=lambda d: d.name)
    repeated = sorted({d.name for d in dirs if sum(e.name == d.name for e in dirs) > 1})
    if repeated:
        raise _folder_error(name, f"class folders {repeated[:3]} appear in more than one of train/, val/, test/")
    return dirs


def _detect(name: str, root: Path) -> str:
    try:
        return detect_layout(name, root)
    except LayoutProblem as problem:
        raise _folder_error(name, str(problem)) from None


def _write_index(path: Path, paths: list[str], labels: np.ndarray,
                 records: list[prepared_array.SourceRecord]) -> None:
    """``path,label,bytes,md5`` per source file: the manifest of what the array was decoded from."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["path", "label", "bytes", "md5"])
        writer.writerows((p, label, r.size, r.md5) for p, label, r in zip(paths, labels.tolist(), records))


def _read_index(path: Path) -> tuple[list[str], np.ndarray]:
    """(relative paths, labels) of a prepared ``<split>.csv``; a damaged index is an ``ArtifactError``."""
    path = require_file(path)
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames is None or not {"path", "label"} <= set(reader.fieldnames):
                raise ArtifactError(path, f"expected the columns path,label, found {reader.fieldnames}")
            rows = list(reader)
        labels = np.asarray([int(row["label"]) for row in rows], dtype=np.int64)
    except (ValueError, TypeError, csv.Error, UnicodeDecodeError) as err:
        if isinstance(err, ArtifactError):
            raise
        raise ArtifactError(path, f"not a valid path,label index, truncated or edited? ({err})") from err
    return [row["path"] for row in rows], labels


def _require_root(name: str, spec: dict) -> Path:
    if not spec.get("root"):
        raise _folder_error(name, f"no folder given (datasets.{name}.root is empty)")
    root = Path(spec["root"])
    if not root.is_dir():
        raise _folder_error(name, f"folder {root.resolve()} does not exist")
    return root


def _prepare_folder(name: str, spec: dict, out_dir: Path) -> dict:
    """Scan the folder, then decode every split once into ``<split>.npy`` (``prepared_array``).

    The arrays are staged in a hidden sub-folder and moved into ``out_dir`` only when every split
    decoded, so a bad image leaves ``out_dir`` as it was.
    """
    root = _require_root(name, spec)
    layout = _detect(name, root)
    classes, splits, sources = _scan_folder(name, spec, root, layout)
    size = int(spec["image_size"])
    staging = out_dir / f".staging-{os.getpid()}"
    staging.mkdir()
    try:
        written = {split: _decode_split(name, root, paths, size, staging / f"{split}.npy")
                   for split, (paths, _) in splits.items()}
        for split in splits:
            os.replace(staging / f"{split}.npy", out_dir / f"{split}.npy")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    arrays = {}
    for split, (paths, labels) in splits.items():
        _write_index(out_dir / f"{split}.csv", paths, labels, written[split].records)
        arrays[split] = {"file": f"{split}.npy", "index": f"{split}.csv",
                         "index_md5": _file_md5(out_dir / f"{split}.csv"),
                         "shape": list(written[split].shape), "chunk_images": written[split].chunk_images,
                         "chunk_md5": written[split].chunk_md5}
    return {
        "source": f"image folder {spec['root']}",
        "format": "memmap",
        "root": str(spec["root"]),
        "image_size": size,
        "resize": prepared_array.RESIZE_RULE,
        "layout": prepared_array.LAYOUT,
        "folder_layout": layout,
        "num_classes": len(classes),
        "classes": classes,
        "splits": sorted(splits),
        "split_sources": sources,
        "sizes": {split: len(labels) for split, (_, labels) in splits.items()},
        "image_shape": [3, size, size],
        "arrays": arrays,
    }


def _scan_folder(name: str, spec: dict, root: Path, layout: str) -> tuple[list[str], dict, dict]:
    """Classes, ``{split: (relative paths, labels)}`` and where each split comes from. A folder without
    a test split gets one carved from train when ``test_fraction`` > 0 (Mini-ImageNet's default 0 keeps
    every image for pretraining)."""
    if layout == "splits":
        classes, train_paths, train_labels = _scan_split(name, root, "train", None)
        splits = {"train": (train_paths, train_labels)}
        sources = {"train": "train/"}
        for split, folder in _extra_splits(name, root):
            splits[split] = _scan_split(name, root, folder, classes)[1:]
            sources[split] = f"{folder}/"
    else:
        dirs = _pooled_class_dirs(name, root, layout)
        classes = [d.name for d in dirs]
        splits = {"train": _scan_classes(name, root, dirs, classes)}
        sources = {"train": "every class folder" + (" of train/, val/ and test/" if layout == "few_shot" else "")}
    if "test" not in splits and spec.get("test_fraction"):
        train_paths, train_labels = splits["train"]
        keep, carve = _stratified_split(train_labels, spec["test_fraction"], spec["split_seed"])
        splits["test"] = ([train_paths[i] for i in carve], train_labels[carve])
        splits["train"] = ([train_paths[i] for i in keep], train_labels[keep])
        sources["test"] = f"stratified {spec['test_fraction']} of {sources['train']} (seed {spec['split_seed']})"
    return classes, splits, sources


def _decode_split(name: str, root: Path, paths: list[str], size: int,
                  target: Path) -> prepared_array.WrittenArray:
    try:
        return prepared_array.write_image_array(target, [root / p for p in paths], size)
    except DatasetError as error:
        raise DatasetError(f"{name}: {error}") from error


def _file_md5(path: Path) -> str:
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def _extra_splits(name: str, root: Path) -> list[tuple[str, str]]:
    """(split, folder) pairs beyond train/: ImageNet's val/ is its test split (where results are
    reported); Mini-ImageNet keeps val/ and test/ as they are when present."""
    if name == "imagenet":
        return [("test", "val")]
    return [(split, split) for split in ("val", "test") if (root / split).is_dir()]


def _folder_sizes(name: str, spec: dict) -> dict[str, int] | None:
    """Images per split, counted (no decoding) when the folder is present in a known layout; else None."""
    root = Path(spec["root"]) if spec.get("root") else None
    try:
        layout = detect_layout(name, root) if root is not None else None
    except LayoutProblem:
        return None
    if layout is None:
        return None

    def count(folder: Path) -> int:
        return sum(1 for d in class_folders(folder) for p in d.iterdir() if is_image(p))

    if layout != "splits":
        folders = [root] if layout == "pooled" else [root / s for s in ("train", "val", "test") if (root / s).is_dir()]
        return _carved_sizes(sum(count(f) for f in folders), spec.get("test_fraction", 0))
    extra = {split: count(root / folder) for split, folder in _extra_splits(name, root) if (root / folder).is_dir()}
    if "test" in extra:
        return {"train": count(root / "train"), **extra}
    return _carved_sizes(count(root / "train"), spec.get("test_fraction", 0), extra)


MINI_IMAGENET_IMAGES = 60_000   # 100 classes x 600 (Vinyals et al. 2016)
IMAGENET_IMAGES = {"train": 1_281_167, "test": 50_000}   # ILSVRC-2012 train and val


# --- registry -------------------------------------------------------------------------------------


def _cifar_entry(name: str, title: str) -> DatasetEntry:
    return DatasetEntry(
        name=name,
        description=f"{title} via torchvision (download with md5 check), 32x32 RGB; verify_md5: false reads "
                    "a CIFAR-format python tarball that is not the official release (a subset)",
        defaults={"root": f"data/raw/{name}", "verify_md5": True},
        build=lambda spec, out: _prepare_cifar(name, spec, out),
        size_of_splits=lambda spec: {"train": 50000, "test": 10000},
        prepared_shape=lambda spec: (3, 32, 32),
    )


def _folder_entry(name: str, description: str, defaults: dict,
                  published: Callable[[dict], dict[str, int]]) -> DatasetEntry:
    return DatasetEntry(
        name=name,
        description=description,
        defaults=defaults,
        build=lambda spec, out: _prepare_folder(name, spec, out),
        size_of_splits=lambda spec: _folder_sizes(name, spec),
        published_sizes=published,
    )


DATASETS: dict[str, DatasetEntry] = {
    "digits": DatasetEntry(
        name="digits",
        description="scikit-learn handwritten digits, 8x8 grayscale, 10 classes (offline)",
        defaults={"test_fraction": 0.25, "split_seed": 0},
        build=_prepare_digits,
        size_of_splits=_digits_sizes,
        prepared_shape=lambda spec: (1, 8, 8),
        view_hparams=DIGIT_VIEWS,
    ),
    "digits_on_photos": DatasetEntry(
        name="digits_on_photos",
        description="scikit-learn digits blended onto crops of its two colour photographs "
                    "(Ganin et al. 2016's MNIST-M construction), RGB, 10 classes (offline)",
        defaults={"image_size": 24, "composites_per_digit": 1, "test_fraction": 0.25, "split_seed": 0,
                  "seed": 0},
        build=_prepare_digits_on_photos,
        size_of_splits=_digits_on_photos_sizes,
        view_hparams=DIGIT_VIEWS,
    ),
    "cifar10": _cifar_entry("cifar10", "CIFAR-10"),
    "cifar100": _cifar_entry("cifar100", "CIFAR-100"),
    "mini_imagenet": _folder_entry(
        "mini_imagenet",
        "Mini-ImageNet (100 classes of 600 images) from a user-supplied image folder: the few-shot split as "
        "distributed or one pooled folder (dssl.data.layouts); every image pretrains unless test_fraction > 0",
        {"root": None, "image_size": 84, "test_fraction": 0.0, "split_seed": 0},
        lambda spec: _carved_sizes(MINI_IMAGENET_IMAGES, spec["test_fraction"]),
    ),
    "imagenet": _folder_entry(
        "imagenet",
        "ImageNet-1k from a user-supplied image folder (train/ and val/ by class)",
        {"root": None, "image_size": 224},
        lambda spec: dict(IMAGENET_IMAGES),
    ),
}

"""Datasets of the pipeline: the registry ``DATASETS`` and ``load_split``, the reader of a prepared split.

The registry keys are the dataset names of ``params.yaml``. Each entry turns a spec into a prepared
folder (the body of the ``prepare@<dataset>`` stage) and reports its training-split size without
loading data, for parameter validation. The sources live beside it: ``dssl.data.digits``,
``dssl.data.cifar`` and ``dssl.data.image_folders``; the folder they write is ``dssl.data.prepared_format``.

Which data the papers use:
- Paper A (FedMAR/DecMAR, ICLR 2026) pretrains on Mini-ImageNet and fine-tunes on CIFAR-10,
  CIFAR-100 and ImageNet; paper B (FedEMA, ICLR 2022) trains and evaluates on CIFAR-10/100.
- The embedded profile uses scikit-learn's handwritten digits, which ship inside the package, so the
  pipeline runs with no network.
- ``digits_on_photos`` (also offline) blends those digits onto crops of the two colour photographs
  scikit-learn ships, as MNIST-M does with MNIST (Ganin et al., 2016): raw pixels separate its classes
  poorly, so what pretraining learns shows in the evaluation (builder: ``dssl.data.photo_digits``).

Every dataset has the splits ``train`` and ``test``, except Mini-ImageNet: a pretraining set (paper A
evaluates on CIFAR and ImageNet), it keeps every image in ``train`` unless ``test_fraction`` carves a
test split or its folder is a split of the images with a ``test/`` (it may add ``val`` then).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from dssl.artifacts import ArtifactError, read_json
from dssl.data.cifar import prepare_cifar
from dssl.data.digits import (
    DIGIT_VIEWS,
    digits_on_photos_sizes,
    digits_sizes,
    prepare_digits,
    prepare_digits_on_photos,
)
from dssl.data.image_folders import folder_sizes, prepare_folder
from dssl.data.imageset import DatasetError, ImageSet
from dssl.data.prepared_format import array_split, memmap_split, write_json
from dssl.data.splits import carved_sizes

__all__ = ["ArtifactError", "DATASETS", "DatasetEntry", "DatasetError", "ImageSet", "load_split"]


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
        return array_split(prepared_dir / f"{split}.npz", meta["num_classes"])
    if meta["format"] == "memmap":
        return memmap_split(prepared_dir, meta_path, meta, split)
    raise ArtifactError(meta_path, f"unknown format {meta['format']!r} (expected 'arrays' or 'memmap')")


MINI_IMAGENET_IMAGES = 60_000   # 100 classes x 600 (Vinyals et al. 2016)
IMAGENET_IMAGES = {"train": 1_281_167, "test": 50_000}   # ILSVRC-2012 train and val


def _cifar_entry(name: str, title: str) -> DatasetEntry:
    return DatasetEntry(
        name=name,
        description=f"{title} via torchvision (download with md5 check), 32x32 RGB; verify_md5: false reads "
                    "a CIFAR-format python tarball that is not the official release (a subset)",
        defaults={"root": f"data/raw/{name}", "verify_md5": True},
        build=lambda spec, out: prepare_cifar(name, spec, out),
        size_of_splits=lambda spec: {"train": 50000, "test": 10000},
        prepared_shape=lambda spec: (3, 32, 32),
    )


def _folder_entry(name: str, description: str, defaults: dict,
                  published: Callable[[dict], dict[str, int]]) -> DatasetEntry:
    return DatasetEntry(
        name=name,
        description=description,
        defaults=defaults,
        build=lambda spec, out: prepare_folder(name, spec, out),
        size_of_splits=lambda spec: folder_sizes(name, spec),
        published_sizes=published,
    )


DATASETS: dict[str, DatasetEntry] = {
    "digits": DatasetEntry(
        name="digits",
        description="scikit-learn handwritten digits, 8x8 grayscale, 10 classes (offline)",
        defaults={"test_fraction": 0.25, "split_seed": 0},
        build=prepare_digits,
        size_of_splits=digits_sizes,
        prepared_shape=lambda spec: (1, 8, 8),
        view_hparams=DIGIT_VIEWS,
    ),
    "digits_on_photos": DatasetEntry(
        name="digits_on_photos",
        description="scikit-learn digits blended onto crops of its two colour photographs "
                    "(Ganin et al. 2016's MNIST-M construction), RGB, 10 classes (offline)",
        defaults={"image_size": 24, "composites_per_digit": 1, "test_fraction": 0.25, "split_seed": 0,
                  "seed": 0},
        build=prepare_digits_on_photos,
        size_of_splits=digits_on_photos_sizes,
        view_hparams=DIGIT_VIEWS,
    ),
    "cifar10": _cifar_entry("cifar10", "CIFAR-10"),
    "cifar100": _cifar_entry("cifar100", "CIFAR-100"),
    "mini_imagenet": _folder_entry(
        "mini_imagenet",
        "Mini-ImageNet (100 classes of 600 images) from a user-supplied image folder: the few-shot split as "
        "distributed or one pooled folder (dssl.data.layouts); every image pretrains unless test_fraction > 0",
        {"root": None, "image_size": 84, "test_fraction": 0.0, "split_seed": 0},
        lambda spec: carved_sizes(MINI_IMAGENET_IMAGES, spec["test_fraction"]),
    ),
    "imagenet": _folder_entry(
        "imagenet",
        "ImageNet-1k from a user-supplied image folder (train/ and val/ by class)",
        {"root": None, "image_size": 224},
        lambda spec: dict(IMAGENET_IMAGES),
    ),
}

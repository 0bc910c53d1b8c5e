"""Datasets of the pipeline: the registry ``DATASETS`` and ``load_split``, the reader of a prepared split.

The registry keys are the dataset names of ``params.yaml``, declared once with their options, defaults and
facts in ``dssl.data.dataset_specs`` (``DATASET_SPECS``). Each entry here turns a spec into a prepared folder
(the body of the ``prepare@<dataset>`` stage) and reports its split sizes without loading data. The sources
live beside it (the module each spec names): ``dssl.data.digits``, ``dssl.data.cifar`` and
``dssl.data.image_folders``; the folder they write is ``dssl.data.prepared_format``.

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
from dssl.data import digits
from dssl.data.cifar import prepare_cifar
from dssl.data.dataset_specs import DATASET_SPECS, DatasetSpec
from dssl.data.image_folders import folder_sizes, prepare_folder
from dssl.data.imageset import DatasetError, ImageSet
from dssl.data.prepared_format import array_split, memmap_split, write_json
from dssl.data.splits import carved_sizes
from dssl.registry import Registry

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


def _shape(spec: DatasetSpec) -> Callable[[dict], tuple[int, int, int]]:
    fixed = spec.image_shape
    return (lambda options: fixed) if fixed is not None else (lambda options: (3, options["image_size"],
                                                                                options["image_size"]))


def _digits_entry(spec: DatasetSpec) -> DatasetEntry:
    """``digits`` and ``digits_on_photos``: ``digits.prepare_<name>`` builds, ``digits.<name>_sizes`` counts."""
    return DatasetEntry(
        name=spec.name, description=spec.description, defaults=spec.defaults(),
        build=getattr(digits, f"prepare_{spec.name}"), size_of_splits=getattr(digits, f"{spec.name}_sizes"),
        prepared_shape=_shape(spec), view_hparams=digits.DIGIT_VIEWS,
    )


def _cifar_entry(spec: DatasetSpec) -> DatasetEntry:
    splits = dict(spec.published_splits or {})
    return DatasetEntry(
        name=spec.name, description=spec.description, defaults=spec.defaults(),
        build=lambda options, out: prepare_cifar(spec.name, options, out),
        size_of_splits=lambda options: dict(splits), prepared_shape=_shape(spec),
    )


def _folder_entry(spec: DatasetSpec) -> DatasetEntry:
    published = dict(spec.published_splits or {})

    def published_sizes(options: dict) -> dict[str, int]:
        if "test_fraction" in options:   # a pooled folder: the test split is carved from the published images
            return carved_sizes(published["train"], options["test_fraction"])
        return dict(published)

    return DatasetEntry(
        name=spec.name, description=spec.description, defaults=spec.defaults(),
        build=lambda options, out: prepare_folder(spec.name, options, out),
        size_of_splits=lambda options: folder_sizes(spec.name, options),
        prepared_shape=_shape(spec), published_sizes=published_sizes,
    )


# The preparer of each source module a spec names.
PREPARERS: dict[str, Callable[[DatasetSpec], DatasetEntry]] = {
    "data.digits": _digits_entry,
    "data.cifar": _cifar_entry,
    "data.image_folders": _folder_entry,
}
DATASETS: Registry[DatasetEntry] = Registry("dataset")
for _spec in DATASET_SPECS.values():
    DATASETS.register(_spec.name)(PREPARERS[_spec.module](_spec))

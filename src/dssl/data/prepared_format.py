"""The prepared form of a dataset on disk: what the ``prepare@<dataset>`` stage writes and readers check.

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
``dssl.data.datasets.load_split`` reads a split through ``array_split`` or ``memmap_split``; a missing or
damaged file is an ``ArtifactError`` naming it.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dssl.artifacts import ArtifactError, check_keys, require_file
from dssl.data.imageset import ArrayImageSet, MemmapImageSet, load_arrays, save_arrays

if TYPE_CHECKING:
    from dssl.data import prepared_array


def write_json(path: Path, obj: Any) -> None:
    """JSON with sorted keys and fixed formatting, so equal content gives equal bytes; written to a
    temporary name and renamed, so a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


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


def array_split(path: Path, num_classes: int) -> ArrayImageSet:
    """An ``arrays`` split (``<split>.npz``), its shapes and labels checked so a damaged file fails here,
    not in the middle of training."""
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


def memmap_split(prepared_dir: Path, meta_path: Path, meta: dict, split: str) -> MemmapImageSet:
    """A decoded image folder's split; its index is checked against meta.json's md5 here, the pixels'
    header and size on opening and the end blocks before the first batch (``MemmapImageSet``; every block:
    ``dssl verify``)."""
    check_keys(meta_path, meta, {"arrays": dict})
    entry = meta["arrays"].get(split)
    if not isinstance(entry, dict):
        raise ArtifactError(meta_path, f"'arrays' has no entry for the split {split!r}")
    check_keys(meta_path, entry, {"file": str, "index": str, "index_md5": str, "chunk_images": int,
                                  "chunk_md5": list})
    index = require_file(prepared_dir / entry["index"])
    if file_md5(index) != entry["index_md5"]:
        raise ArtifactError(index, "checksum mismatch with meta.json's index_md5; the index was edited or "
                                   "damaged after the prepare stage wrote it")
    paths, labels = _read_index(index)
    _check_labels(index, labels, meta["num_classes"])
    return MemmapImageSet(prepared_dir / entry["file"], labels, meta["num_classes"], entry["chunk_images"],
                          entry["chunk_md5"])


def _check_labels(path: Path, labels: np.ndarray, num_classes: int) -> None:
    if len(labels) and not (0 <= labels.min() and labels.max() < num_classes):
        raise ArtifactError(path, f"labels outside 0..{num_classes - 1} (meta.json's num_classes)")


def array_meta(source: str, classes: list[str], splits: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict:
    """The ``meta.json`` fields of an ``arrays`` dataset, read off the arrays themselves (``[N, H, W, C]``)."""
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


def save_splits(out_dir: Path, splits: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """One ``<split>.npz`` per split with ``images`` and int64 ``labels``."""
    for split, (images, labels) in splits.items():
        save_arrays(out_dir / f"{split}.npz", images=images, labels=labels.astype(np.int64))


def write_index(path: Path, paths: list[str], labels: np.ndarray,
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


def file_md5(path: Path) -> str:
    """The md5 of a whole file (an index, a source tarball): what ``meta.json`` records of it."""
    return hashlib.md5(Path(path).read_bytes()).hexdigest()

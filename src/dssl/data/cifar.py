"""CIFAR-10 and CIFAR-100 (Krizhevsky, 2009), the datasets of paper B and paper A's fine-tuning.

Read through torchvision: downloaded with its md5 check, or (``verify_md5: false``) a CIFAR-format
python tarball that is not the official release (a subset, a rebuilt copy), read without the md5
checks. Written in the prepared ``arrays`` format (``dssl.data.prepared_format``).
"""

from __future__ import annotations

import urllib.error
from pathlib import Path
from typing import Any

import numpy as np

from dssl.data.imageset import DatasetError
from dssl.data.prepared_format import array_meta, file_md5, save_splits


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


def prepare_cifar(name: str, spec: dict, out_dir: Path) -> dict:
    """CIFAR's train and test batches as ``arrays`` splits; ``meta.json``'s source says which copy was read."""
    root = Path(spec["root"])
    fetch = _fetch_cifar if spec["verify_md5"] else _unverified_cifar
    train, test = fetch(name, root, train=True), fetch(name, root, train=False)
    splits = {
        part: (np.asarray(data.data, dtype=np.uint8), np.asarray(data.targets, dtype=np.int64))
        for part, data in (("train", train), ("test", test))
    }
    save_splits(out_dir, splits)
    cls = _cifar_class(name)
    archive = root / cls.filename
    source = (f"torchvision.datasets.{cls.__name__} ({cls.url}, md5 {cls.tgz_md5})" if spec["verify_md5"] else
              f"CIFAR-format tarball {spec['root']}/{cls.filename} (md5 "
              f"{file_md5(archive) if archive.is_file() else 'unknown: extracted folder only'}, not verified)")
    return array_meta(source, list(train.classes), splits)

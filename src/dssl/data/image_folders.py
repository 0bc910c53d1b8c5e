"""Image-folder datasets (Mini-ImageNet, ImageNet): scanned by class folder, decoded once into arrays.

A folder in one of the layouts of ``dssl.data.layouts`` is scanned into classes, relative file paths and
labels per split, then every split decoded once into the prepared ``memmap`` format
(``dssl.data.prepared_array`` writes the array, ``dssl.data.prepared_format`` the index). ImageNet's
``val/`` is its test split; Mini-ImageNet (Vinyals et al., 2016), a pretraining set in paper A, keeps
every image in ``train`` unless ``test_fraction`` carves a test split or the folder has a ``test/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from dssl.data import prepared_array
from dssl.data.imageset import DatasetError
from dssl.data.layouts import IMAGE_EXTENSIONS, LayoutProblem, class_folders, detect_layout, is_image, layout_help
from dssl.data.prepared_format import file_md5, write_index
from dssl.data.splits import carved_sizes, stratified_split


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


def _require_root(name: str, spec: dict) -> Path:
    if not spec.get("root"):
        raise _folder_error(name, f"no folder given (datasets.{name}.root is empty)")
    root = Path(spec["root"])
    if not root.is_dir():
        raise _folder_error(name, f"folder {root.resolve()} does not exist")
    return root


def prepare_folder(name: str, spec: dict, out_dir: Path) -> dict:
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
        write_index(out_dir / f"{split}.csv", paths, labels, written[split].records)
        arrays[split] = {"file": f"{split}.npy", "index": f"{split}.csv",
                         "index_md5": file_md5(out_dir / f"{split}.csv"),
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
        keep, carve = stratified_split(train_labels, spec["test_fraction"], spec["split_seed"])
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


def _extra_splits(name: str, root: Path) -> list[tuple[str, str]]:
    """(split, folder) pairs beyond train/: ImageNet's val/ is its test split (where results are
    reported); Mini-ImageNet keeps val/ and test/ as they are when present."""
    if name == "imagenet":
        return [("test", "val")]
    return [(split, split) for split in ("val", "test") if (root / split).is_dir()]


def folder_sizes(name: str, spec: dict) -> dict[str, int] | None:
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
        return carved_sizes(sum(count(f) for f in folders), spec.get("test_fraction", 0))
    extra = {split: count(root / folder) for split, folder in _extra_splits(name, root) if (root / folder).is_dir()}
    if "test" in extra:
        return {"train": count(root / "train"), **extra}
    return carved_sizes(count(root / "train"), spec.get("test_fraction", 0), extra)

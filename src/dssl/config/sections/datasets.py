"""``datasets``: the known datasets, each with its own keys, and an image folder's layout."""

from __future__ import annotations

from pathlib import Path

from dssl.config.checker import Checker
from dssl.config.dataset_facts import DATASET_FACTS
from dssl.config.options import DatasetOptions
from dssl.data.layouts import LayoutProblem, detect_layout, layout_help  # standard library only


DATASET_KEYS = {
    "digits": {"test_fraction", "split_seed"},
    # split_seed: the train/test split of the source digits; seed: the photograph crops alone
    "digits_on_photos": {"image_size", "composites_per_digit", "test_fraction", "split_seed", "seed"},
    # verify_md5: false reads a CIFAR-format tarball that is not the official release (a subset)
    "cifar10": {"root", "verify_md5"},
    "cifar100": {"root", "verify_md5"},
    "mini_imagenet": {"root", "image_size", "test_fraction", "split_seed"},
    "imagenet": {"root", "image_size"},
}


def check_datasets(c: Checker) -> None:
    for name, spec in c.section("datasets").items():
        path = f"datasets.{name}"
        if name not in DATASET_FACTS:
            c.add(path, "unknown dataset", f"one of: {', '.join(sorted(DATASET_FACTS))}")
            continue
        spec = c.mapping(spec if spec is not None else {}, path)
        if spec is None:
            continue
        c.unknown_keys(spec, DATASET_KEYS[name], path)
        if "test_fraction" in spec:
            optional = DATASET_FACTS[name].get("optional_test", False)
            c.number(spec, "test_fraction", path, low=0, high=0.9, low_open=not optional)
        for key in ("image_size", "composites_per_digit", "seed", "split_seed"):
            c.declared(spec, key, path, DatasetOptions)
        if "verify_md5" in spec and not isinstance(spec["verify_md5"], bool):
            c.add(f"{path}.verify_md5", f"must be true or false, got {spec['verify_md5']!r}")
        if DATASET_FACTS[name]["needs_root"]:
            _check_root(c, spec, path, name)


def _check_root(c: Checker, spec: dict, path: str, name: str) -> None:
    root = spec.get("root")
    if not root:
        c.add(f"{path}.root", "missing", f"the folder holding {name} as {layout_help(name)}")
        return
    folder = Path(root) if Path(root).is_absolute() else c.root / root
    try:
        detect_layout(name, folder)
        if name == "imagenet" and not (folder / "train").is_dir():
            raise LayoutProblem(f"{folder} has no train/ folder")
    except LayoutProblem as problem:
        c.add(f"{path}.root", str(problem), f"accepted: {layout_help(name)}")

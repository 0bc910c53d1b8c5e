"""``datasets``: the known datasets, each with the options its spec declares (``dssl.data.dataset_specs``), and
an image folder's layout."""

from __future__ import annotations

from pathlib import Path

from dssl.config.checker import Checker
from dssl.config.sections.spec_options import check_options, check_unknown
from dssl.data.dataset_specs import DATASET_SPECS  # standard library only
from dssl.data.layouts import LayoutProblem, detect_layout, layout_help  # standard library only


def check_datasets(c: Checker) -> None:
    """Each dataset: a known name with the keys its spec declares, and the folder of one that needs it."""
    for name, spec in c.section("datasets").items():
        path = f"datasets.{name}"
        if name not in DATASET_SPECS:
            c.add(path, "unknown dataset", f"one of: {', '.join(DATASET_SPECS.names())}")
            continue
        spec = c.mapping(spec if spec is not None else {}, path)
        if spec is None:
            continue
        dataset = DATASET_SPECS[name]
        check_unknown(c, spec, path, dataset.options)
        good = check_options(c, spec, path, dataset.options)
        if dataset.needs_root and (good.get("root") is not None or spec.get("root") is None):
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

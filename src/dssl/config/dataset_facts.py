"""Whether a dataset will have a test split, known without importing the data code (which imports torch):
from its spec (``dssl.data.dataset_specs``) and, for an image folder, its layout. Its training-split size is
the spec's own ``DatasetSpec.train_size``."""

from __future__ import annotations

from pathlib import Path

from dssl.data.dataset_specs import DATASET_SPECS  # standard library only
from dssl.data.layouts import LayoutProblem, detect_layout  # standard library only


def has_test_split(name: str, spec: dict, root: Path) -> bool:
    """Whether the prepared dataset will have a test split: always, except a dataset whose test split is
    optional (Mini-ImageNet) without ``test_fraction``, unless its folder is a split of the images with a
    test/ folder."""
    if not DATASET_SPECS[name].optional_test or not isinstance(spec, dict) or spec.get("test_fraction"):
        return True
    folder = Path(spec.get("root") or "")
    folder = folder if folder.is_absolute() else root / folder
    try:
        return detect_layout(name, folder) == "splits" and (folder / "test").is_dir()
    except LayoutProblem:
        return True  # reported under datasets.<name>.root

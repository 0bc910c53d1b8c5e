"""What the validator knows of each dataset without importing the data code (which imports torch):
class counts, training-split sizes, whether it needs a folder, and whether it will have a test split."""

from __future__ import annotations

import math
from pathlib import Path

from dssl.data.layouts import LayoutProblem, detect_layout  # standard library only


# Facts the validator needs without importing the data code (which imports torch). A test keeps
# these names equal to the dataset registry's keys.
DATASET_FACTS = {
    "digits": {"num_classes": 10, "train_size": None, "needs_root": False},
    "digits_on_photos": {"num_classes": 10, "train_size": None, "needs_root": False},
    "cifar10": {"num_classes": 10, "train_size": 50000, "needs_root": False},
    "cifar100": {"num_classes": 100, "train_size": 50000, "needs_root": False},
    # Mini-ImageNet pretrains on every image by default (test_fraction 0): a test split is optional.
    "mini_imagenet": {"num_classes": 100, "train_size": None, "needs_root": True, "image_size": 84,
                      "optional_test": True},
    "imagenet": {"num_classes": 1000, "train_size": None, "needs_root": True, "image_size": 224},
}
DIGITS_SIZE = 1797  # scikit-learn's load_digits


def dataset_train_size(name: str, spec: dict) -> int | None:
    """Training-split size known without loading the data (None when it needs a folder scan)."""
    if name in ("digits", "digits_on_photos"):
        test_fraction = spec.get("test_fraction", 0.25)
        copies = spec.get("composites_per_digit", 1) if name == "digits_on_photos" else 1
        return (DIGITS_SIZE - math.ceil(test_fraction * DIGITS_SIZE)) * copies
    return DATASET_FACTS[name]["train_size"]


def has_test_split(name: str, spec: dict, root: Path) -> bool:
    """Whether the prepared dataset will have a test split: always, except Mini-ImageNet without
    ``test_fraction`` unless its folder is a split of the images with a test/ folder."""
    if not DATASET_FACTS[name].get("optional_test") or spec.get("test_fraction"):
        return True
    folder = Path(spec.get("root") or "")
    folder = folder if folder.is_absolute() else root / folder
    try:
        return detect_layout(name, folder) == "splits" and (folder / "test").is_dir()
    except LayoutProblem:
        return True  # reported under datasets.<name>.root

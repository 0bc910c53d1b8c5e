"""The test split a dataset's preparation carves from its images: stratified, with exact counts.

The digits split their 1797 images, an image folder without a test split may carve one from train
(``test_fraction``); the counts follow scikit-learn's rounding (test = ceil) on the fraction as written.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping

import numpy as np


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
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


def carved_sizes(total: int, test_fraction: float, extra: Mapping[str, int] | None = None) -> dict[str, int]:
    """Split sizes of ``total`` images of which ``test_fraction`` become the test split (none at 0)."""
    test = _test_count(total, test_fraction)
    return {"train": total - test, **({"test": test} if test else {}), **(extra or {})}

"""Index splits of a training split (numpy only): the validation split and the labelled subset.

Model selection rule of every protocol: hyper-parameters (and the epoch) are chosen on a validation
split carved from the training split (stratified, seeded); the test split is scored once.
"""

from __future__ import annotations

import numpy as np


def stratified_split(labels: np.ndarray, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (fit, val) index arrays: about ``val_fraction`` of every class goes to validation.

    A class with at least two samples gives at least one to each side; a singleton stays in fit.
    """
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    val = []
    for cls in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == cls))
        count = int(round(val_fraction * len(members)))
        count = min(max(count, 1), len(members) - 1)
        val.append(members[:count])
    val_idx = np.sort(np.concatenate(val)).astype(np.int64)
    fit_idx = np.setdiff1d(np.arange(len(labels), dtype=np.int64), val_idx)
    return fit_idx, val_idx


def labelled_subset(labels: np.ndarray, pool: np.ndarray, label_fraction: float, seed: int) -> np.ndarray:
    """Sorted indices of a class-stratified subset of ``pool`` holding ``label_fraction`` of the labels.

    Class c keeps ``round(label_fraction * n_c)`` samples, n_c its count in the whole training split
    (so 1 % of CIFAR-10's 50k labels is 500 images, as in paper B), at least 1 and at most what the
    pool holds. The semi-supervised setting of paper B, section 3; SimCLR and BYOL also sample their
    1 % / 10 % subsets class-balanced.
    """
    if not 0 < label_fraction <= 1:
        raise ValueError(f"label_fraction must be in (0, 1], got {label_fraction}")
    labels, pool = np.asarray(labels), np.asarray(pool, dtype=np.int64)
    # A stream of its own: the validation split drew from default_rng(seed) already.
    rng = np.random.default_rng([seed, 1])
    chosen = []
    for cls in np.unique(labels[pool]):
        members = rng.permutation(pool[labels[pool] == cls])
        want = max(int(round(label_fraction * int(np.sum(labels == cls)))), 1)
        chosen.append(members[:want])
    return np.sort(np.concatenate(chosen)).astype(np.int64)

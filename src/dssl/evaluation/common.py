"""Pieces shared by the evaluation protocols: the validation split, feature extraction, accuracy.

Model selection rule of every protocol: hyper-parameters (and the epoch) are chosen on a validation
split carved from the training split (stratified, seeded); the selected model -- trained on the rest
of the training split only, not retrained on train + val -- is scored once on the test split. Paper B's
code reports the best *test* epoch; we do not.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Protocol, TypeVar

import numpy as np
import torch
from torch import nn


class LabelledImages(Protocol):
    """What evaluation needs from ``dssl.data``'s ImageSet."""

    labels: np.ndarray
    num_classes: int

    def __len__(self) -> int: ...

    def get_batch(self, indices: np.ndarray) -> torch.Tensor: ...


C = TypeVar("C")


def coerce_config(cls: type[C], config: C | Mapping[str, Any] | None) -> C:
    """A protocol config from a dataclass instance, a params mapping (lists become tuples) or None."""
    if config is None:
        return cls()
    if isinstance(config, cls):
        return config
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(config) - known
    if unknown:
        raise TypeError(f"unknown {cls.__name__} keys {sorted(unknown)}; known: {sorted(known)}")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})


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


def module_device(module: nn.Module) -> torch.device:
    return next(module.parameters()).device


def load_images(images: LabelledImages, indices: np.ndarray, device: torch.device) -> torch.Tensor:
    """A float batch in [0, 1] -- the input range the SSL methods trained the encoder on."""
    return images.get_batch(indices).to(device).float().div_(255.0)


@torch.no_grad()
def extract_features(encoder: nn.Module, images: LabelledImages, indices: np.ndarray,
                     batch_size: int) -> torch.Tensor:
    """Frozen encoder features ``[len(indices), D]`` (eval mode, no augmentation)."""
    was_training = encoder.training
    encoder.eval()
    device = module_device(encoder)
    try:
        chunks = [encoder(load_images(images, indices[i:i + batch_size], device))
                  for i in range(0, len(indices), batch_size)]
    finally:
        encoder.train(was_training)
    return torch.cat(chunks)


@torch.no_grad()
def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    return float((logits.argmax(dim=1) == labels).float().mean())


def label_tensor(images: LabelledImages, indices: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(np.asarray(images.labels)[indices], dtype=torch.long, device=device)

"""Toy image sets and a pass-through encoder for the evaluation tests."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from dssl.data.imageset import ArrayImageSet


class CountingImages(ArrayImageSet):
    """An ArrayImageSet that records which indices were read."""

    def __init__(self, *args):
        super().__init__(*args)
        self.reads: list[np.ndarray] = []

    def get_batch(self, indices):
        self.reads.append(np.asarray(indices))
        return super().get_batch(indices)


def separable_images(num: int, seed: int, size: int = 4, classes: int = 3) -> CountingImages:
    """Class c lights up its own row of pixels: linearly separable, with pixel noise (needs size >= classes)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(num) % classes
    pixels = rng.integers(0, 60, size=(num, size, size, 1))
    for c in range(classes):
        pixels[labels == c, c, :, 0] += 180
    return CountingImages(pixels.astype(np.uint8), labels, classes)


class FlattenEncoder(nn.Module):
    """A frozen identity encoder: features are the pixels themselves."""

    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, dim, bias=False)
        nn.init.eye_(self.proj.weight)
        self.feature_dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x.flatten(1))

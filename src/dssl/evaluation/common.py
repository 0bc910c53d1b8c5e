"""Pieces shared by the evaluation protocols: feature extraction, labels, accuracy.

Model selection rule of every protocol: hyper-parameters (and the epoch) are chosen on a validation
split carved from the training split (``splits.stratified_split``: stratified, seeded); the selected
model -- trained on the rest of the training split only, not retrained on train + val -- is scored once
on the test split. Paper B's code reports the best *test* epoch; we do not.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from torch import nn


class LabelledImages(Protocol):
    """What evaluation needs from ``dssl.data``'s ImageSet."""

    labels: np.ndarray
    num_classes: int

    def __len__(self) -> int: ...

    def get_batch(self, indices: np.ndarray) -> torch.Tensor: ...


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

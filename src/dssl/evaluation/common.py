"""Pieces shared by the evaluation protocols: batches on the device, feature extraction, labels, accuracy.

Model selection rule of every protocol: hyper-parameters (and the epoch) are chosen on a validation
split carved from the training split (``splits.stratified_split``: stratified, seeded); the selected
model -- trained on the rest of the training split only, not retrained on train + val -- is scored once
on the test split. Paper B's code reports the best *test* epoch; we do not.

Images reach the device as uint8 and are resized there (``dssl.data.batches.DeviceBatches``); the
frozen-encoder passes run under the protocol's step options (``forward_context``: bf16 autocast,
compiled parts) and count on the device, so nothing waits for the device batch by batch.
"""

from __future__ import annotations

import copy
from typing import Iterator, Protocol, Sequence

import numpy as np
import torch
from torch import nn

from dssl.data.batches import DeviceBatches
from dssl.training.options import StepOptions
from dssl.training.step import forward_context, prepare_batch, prepare_model


class LabelledImages(Protocol):
    """What evaluation needs from ``dssl.data``'s ImageSet."""

    labels: np.ndarray
    num_classes: int

    def __len__(self) -> int: ...

    def get_batch(self, indices: np.ndarray) -> torch.Tensor: ...


def module_device(module: nn.Module) -> torch.device:
    return next(module.parameters()).device


def in_batches(indices: np.ndarray, batch_size: int) -> list[np.ndarray]:
    return [indices[start:start + batch_size] for start in range(0, len(indices), batch_size)]


def device_batches(images: LabelledImages, indices: np.ndarray, batch_size: int,
                   device: torch.device) -> Iterator[torch.Tensor]:
    """``images[indices]`` in order, ``batch_size`` at a time, as [0, 1] floats on ``device`` -- the input
    range the SSL methods trained the encoder on."""
    return DeviceBatches(images, device)(in_batches(np.asarray(indices), batch_size))


def load_images(images: LabelledImages, indices: np.ndarray, device: torch.device) -> torch.Tensor:
    """One float batch in [0, 1] on ``device``."""
    return next(iter(device_batches(images, indices, max(len(indices), 1), device)))


def frozen_copy(encoder: nn.Module, options: StepOptions) -> nn.Module:
    """The encoder to extract features with: itself for the plain step, else a copy converted and
    compiled as ``options`` ask (the caller's encoder stays as it was)."""
    if not (options.channels_last or options.compile):
        return encoder
    clone = copy.deepcopy(encoder)
    prepare_model(clone, options)
    return clone


@torch.no_grad()
def extract_features(encoder: nn.Module, images: LabelledImages, indices: np.ndarray,
                     batch_size: int, options: StepOptions = StepOptions()) -> torch.Tensor:
    """Frozen encoder features ``[len(indices), D]`` in float32 (eval mode, no augmentation)."""
    was_training = encoder.training
    model = frozen_copy(encoder, options)
    model.eval()
    try:
        with forward_context(model, options):
            chunks = [model(prepare_batch(batch, options)).float()
                      for batch in device_batches(images, indices, batch_size, module_device(encoder))]
    finally:
        encoder.train(was_training)
    return torch.cat(chunks)


@torch.no_grad()
def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    return float((logits.argmax(dim=1) == labels).float().mean())


def label_tensor(images: LabelledImages, indices: np.ndarray, device: torch.device) -> torch.Tensor:
    """Labels of ``indices`` on ``device`` (copied without waiting for the device)."""
    labels = torch.from_numpy(np.ascontiguousarray(np.asarray(images.labels)[indices], dtype=np.int64))
    return labels.to(device, non_blocking=True)


@torch.no_grad()
def correct_count(model: nn.Module, images: LabelledImages, indices: np.ndarray, batch_size: int,
                  options: StepOptions = StepOptions()) -> int:
    """How many of ``images[indices]`` ``model`` classifies right (eval mode; one host sync at the end)."""
    model.eval()
    device = module_device(model)
    correct = torch.zeros((), dtype=torch.long, device=device)
    batches = in_batches(np.asarray(indices), batch_size)
    with forward_context(model, options):
        for chunk, pixels in zip(batches, DeviceBatches(images, device)(batches)):
            logits = model(prepare_batch(pixels, options))
            correct += (logits.argmax(dim=1) == label_tensor(images, chunk, device)).sum()
    return int(correct)


def index_batches(order: np.ndarray, batch_size: int) -> Sequence[np.ndarray]:
    """One epoch's batches of a shuffled ``order``; a trailing batch of one sample is left out
    (batch norm cannot train on it)."""
    return [batch for batch in in_batches(order, batch_size) if len(batch) >= 2]

"""Re-estimate an encoder's BatchNorm running statistics on the images the evaluation will show it.

A pretrained encoder's BN running mean and variance are averages over what pretraining fed it:
MAE-CNN's encoder sees images with 75 % of their patches zeroed, SimSiam's sees cropped, colour-jittered
views. The frozen-feature protocols (linear probe, kNN, few-shot) run the encoder in eval mode on whole,
unaugmented images, so those statistics normalise the wrong distribution. As in "precise BN" (Wu &
Johnson, 2021, "Rethinking 'Batch' in BatchNorm"), the statistics are recomputed on unaugmented training
images (no labels needed) before evaluation; the learned weights (BN's affine scale and shift included)
are left untouched. Encoders without BatchNorm (the ViTs: LayerNorm) are returned unchanged.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from dssl.evaluation.common import LabelledImages, device_batches, module_device

_BN = nn.modules.batchnorm._BatchNorm


def batchnorm_layers(module: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """Every BatchNorm layer that keeps running statistics."""
    return [m for m in module.modules() if isinstance(m, _BN) and m.track_running_stats]


@torch.no_grad()
def reestimate_batchnorm(encoder: nn.Module, images: LabelledImages, indices: np.ndarray | None = None,
                         batch_size: int = 256) -> int:
    """Replace the BN running statistics of ``encoder`` by their average over ``images[indices]``.

    Each BN layer is reset and run with ``momentum=None`` (a cumulative average over batches, weighted
    by batch), in train mode while every other module stays in eval mode; the input order is fixed, so
    the result is deterministic. Parameters are not changed. Returns the number of BN layers updated.
    """
    layers = batchnorm_layers(encoder)
    if not layers:
        return 0
    indices = np.arange(len(images)) if indices is None else np.asarray(indices)
    was_training = encoder.training
    momenta = [layer.momentum for layer in layers]
    encoder.eval()
    for layer in layers:
        layer.reset_running_stats()
        layer.momentum = None
        layer.train()
    try:
        for batch in device_batches(images, indices, batch_size, module_device(encoder)):
            encoder(batch)
    finally:
        for layer, momentum in zip(layers, momenta):
            layer.momentum = momentum
        encoder.train(was_training)
    return len(layers)

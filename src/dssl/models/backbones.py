"""Backbone registry: ``BACKBONES[name](image_size, in_chans, **overrides) -> nn.Module``.

Names are the strings used in ``params.yaml``. Every backbone maps [B, C, H, W] images in [0, 1] to
pooled features [B, feature_dim] in ``forward`` and exposes ``feature_dim``. CNNs also expose
``forward_features`` / ``feature_stride`` (see :mod:`dssl.models.cnn`); ViTs expose the timm parts MAE
needs (see :mod:`dssl.models.vit`).

| name | architecture | paper sizes |
|---|---|---|
| resnet18_cifar | ResNet-18, 3x3 stem, no max-pool | paper B (CIFAR) |
| resnet18_imagenet | ResNet-18, 7x7 stem + max-pool | paper A (Mini-ImageNet) |
| tiny_vit | ViT, patch 14 (224 px), dim 320, depth 9, 16 heads | paper A's Tiny-ViT |
| cnn_small | 3 conv-BN-ReLU layers (32, 64, 128) | embedded CPU profile |
| vit_small | ViT, 4 x 4 patches (patch = image side / 4), dim 96, depth 2, 4 heads | embedded CPU profile |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dssl.registry import Registry

if TYPE_CHECKING:
    from torch import nn

BackboneBuilder = Callable[..., "nn.Module"]

# Lazy: each builder lives beside its architecture (``dssl.models.cnn``, ``dssl.models.vit``), decorated
# ``@register_backbone("<name>")``, and its module is imported when the name is used.
BACKBONES: Registry[BackboneBuilder] = Registry.lazy("backbone")


def register_backbone(name: str, family: str) -> Callable[[BackboneBuilder], BackboneBuilder]:
    """Decorator: register a builder ``(image_size, in_chans, **overrides) -> nn.Module`` under ``name``.

    ``family`` (``"cnn"`` or ``"vit"``, a literal: the params validator reads it from the source) selects the
    optimizer recipe a model trains with and the ``per_family`` overrides of the evaluation protocols."""
    def register(builder: BackboneBuilder) -> BackboneBuilder:
        builder.family = family
        return BACKBONES.register(name)(builder)

    return register


def create_backbone(name: str, image_size: int, in_chans: int, **overrides: Any) -> "nn.Module":
    """Build the backbone registered as ``name`` for ``image_size`` px, ``in_chans``-channel images.

    ``overrides`` change a builder's keyword defaults (e.g. ``patch_size`` of a ViT); an unknown name
    raises :class:`~dssl.registry.UnknownNameError` listing the known ones.
    """
    return BACKBONES[name](image_size, in_chans, **overrides)


def count_parameters(module: "nn.Module", trainable_only: bool = True) -> int:
    """Number of parameters; trainable only by default (fixed position embeddings are not counted)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)

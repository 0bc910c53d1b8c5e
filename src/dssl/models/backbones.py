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
from typing import Any

from torch import nn

from dssl.models.cnn import ResNetBackbone, SmallCNN
from dssl.registry import Registry
from dssl.models.vit import ViTBackbone

BackboneBuilder = Callable[..., nn.Module]

BACKBONES: Registry[BackboneBuilder] = Registry("backbone")


@BACKBONES.register("resnet18_cifar")
def resnet18_cifar(image_size: int, in_chans: int) -> ResNetBackbone:
    """ResNet-18 with the CIFAR stem (stride 8): 11.17 M parameters at 3 channels."""
    del image_size  # fully convolutional: any size works
    return ResNetBackbone(in_chans, stem="cifar")


@BACKBONES.register("resnet18_imagenet")
def resnet18_imagenet(image_size: int, in_chans: int) -> ResNetBackbone:
    """ResNet-18 with torchvision's ImageNet stem (stride 32): 11.18 M parameters at 3 channels."""
    del image_size
    return ResNetBackbone(in_chans, stem="imagenet")


@BACKBONES.register("tiny_vit")
def tiny_vit(image_size: int, in_chans: int, patch_size: int = 14) -> ViTBackbone:
    """Paper A's Tiny-ViT [code]: 224 px, patch 14 (16 x 16 tokens), dim 320, 16 heads, depth 9.

    11.29 M trainable parameters; with MAE's decoder (dim 128, 1 block) 11.60 M, the figure in paper
    A's Table 2. Not to be confused with Microsoft's hierarchical TinyViT.
    """
    return ViTBackbone(image_size, in_chans, patch_size, embed_dim=320, depth=9, num_heads=16)


@BACKBONES.register("cnn_small")
def cnn_small(image_size: int, in_chans: int, widths: tuple[int, ...] = (32, 64, 128)) -> SmallCNN:
    """Small CNN for the embedded profile (16x16, 1 channel): 128-d features, stride 4."""
    del image_size
    return SmallCNN(in_chans, widths)


@BACKBONES.register("vit_small")
def vit_small(
    image_size: int, in_chans: int, patch_size: int | None = None, depth: int = 2, num_heads: int = 4
) -> ViTBackbone:
    """Small ViT for the embedded profile: a 4 x 4 grid of tokens (patch = image side / 4: 4 px at
    16 px, 2 px at the digits' native 8 px), dim 96, depth 2, 4 heads."""
    patch_size = patch_size or max(1, image_size // 4)
    return ViTBackbone(image_size, in_chans, patch_size, embed_dim=96, depth=depth, num_heads=num_heads)


def create_backbone(name: str, image_size: int, in_chans: int, **overrides: Any) -> nn.Module:
    """Build the backbone registered as ``name`` for ``image_size`` px, ``in_chans``-channel images.

    ``overrides`` change a builder's keyword defaults (e.g. ``patch_size`` of a ViT); an unknown name
    raises :class:`~dssl.registry.UnknownNameError` listing the known ones.
    """
    return BACKBONES[name](image_size, in_chans, **overrides)


def count_parameters(module: nn.Module, trainable_only: bool = True) -> int:
    """Number of parameters; trainable only by default (fixed position embeddings are not counted)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)

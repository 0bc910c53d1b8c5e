"""Backbone factory: ``create_backbone(name, image_size, in_chans, **overrides) -> nn.Module``.

Names are the strings used in ``params.yaml``; each backbone is declared once, torch-free, in
``dssl.config.backbones.<name>`` (``BACKBONE_SPECS``): its options with their defaults and ranges, its family and
its builder ``(image_size, in_chans, **options)``, which lives beside its architecture (``dssl.models.cnn``,
``dssl.models.vit``) and is imported only when that backbone is built, so a stage depends on its own backbone's
modules alone.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from dssl.config.backbones import BACKBONE_SPECS  # standard library only: the specs, not the architectures

if TYPE_CHECKING:
    from torch import nn


def create_backbone(name: str, image_size: int, in_chans: int, **overrides: Any) -> "nn.Module":
    """Build backbone ``name`` for ``image_size`` px, ``in_chans``-channel images.

    ``overrides`` change options its spec declares (e.g. ``patch_size`` of a ViT); the rest keep their declared
    defaults. An unknown name raises :class:`~dssl.registry.UnknownNameError` listing the known ones; an unknown
    option a ValueError listing the declared ones (``EntrySpec.options``); a value outside its declaration a
    ValueError naming it.
    """
    spec = BACKBONE_SPECS[name]
    config = spec.options(overrides)
    return spec.load()(image_size, in_chans, **asdict(config))


def count_parameters(module: "nn.Module", trainable_only: bool = True) -> int:
    """Number of parameters; trainable only by default (fixed position embeddings are not counted)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)

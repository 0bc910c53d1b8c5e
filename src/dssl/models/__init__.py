"""Backbones (registry ``BACKBONES``, factory ``create_backbone``)."""

from dssl.models.backbones import BACKBONES, count_parameters, create_backbone
from dssl.models.cnn import ResNetBackbone, SmallCNN
from dssl.registry import Registry, UnknownNameError
from dssl.models.vit import ViTBackbone

__all__ = [
    "BACKBONES",
    "Registry",
    "ResNetBackbone",
    "SmallCNN",
    "UnknownNameError",
    "ViTBackbone",
    "count_parameters",
    "create_backbone",
]

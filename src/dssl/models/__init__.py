"""Backbones (registry ``BACKBONES``, factory ``create_backbone``).

The architectures (``dssl.models.cnn``, ``dssl.models.vit``) are imported when a backbone of theirs is
built, so a stage depends on its own backbone's module alone.
"""

from dssl.models.backbones import BACKBONES, count_parameters, create_backbone, register_backbone
from dssl.registry import Registry, UnknownNameError

__all__ = [
    "BACKBONES",
    "Registry",
    "UnknownNameError",
    "count_parameters",
    "create_backbone",
    "register_backbone",
]

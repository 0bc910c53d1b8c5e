"""Backbones (declared in ``dssl.config.backbones``, registry ``BACKBONE_SPECS``; factory ``create_backbone``).

The architectures (``dssl.models.cnn``, ``dssl.models.vit``) are imported when a backbone of theirs is
built, so a stage depends on its own backbone's module alone.
"""

from dssl.config.backbones import BACKBONE_SPECS
from dssl.models.backbones import count_parameters, create_backbone
from dssl.registry import UnknownNameError

__all__ = [
    "BACKBONE_SPECS",
    "UnknownNameError",
    "count_parameters",
    "create_backbone",
]

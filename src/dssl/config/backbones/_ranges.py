"""The ranges several backbones' options share (standard library only)."""

from __future__ import annotations

from dssl.config.ranges import Range

PATCH = Range(1, 4_096)      # a ViT's patch side, in pixels
DEPTH = Range(1, 1_024)      # a ViT's number of transformer blocks
HEADS = Range(1, 1_024)      # a ViT's attention heads (they must divide its width)
WIDTH = Range(1, 65_536)     # a convolution's output channels

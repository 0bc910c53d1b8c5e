"""The small CPU ViT's options (``backbone: vit_small``), declared once.

References:
    [0] ViT, 2020, https://arxiv.org/abs/2010.11929
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from dssl.config.backbones import BackboneSpec
from dssl.config.backbones._ranges import DEPTH, HEADS, PATCH
from dssl.specs import Options


@dataclass(frozen=True)
class ViTSmallConfig(Options):
    """A small ViT [0] for the embedded CPU profile: width 96, a class token and fixed 2-D sin-cos position
    embeddings; this project's own sizes (ViT-B/16 has width 768, depth 12, 12 heads).

    ``patch_size``: ``None`` (default) keeps a 4 x 4 grid of tokens, patch = image side / 4 (4 px at 16 px, 2 px
    at the digits' native 8 px); a number must divide the image side. ``depth``: transformer blocks (2).
    ``num_heads``: attention heads (4), a divisor of the width 96.
    """

    patch_size: Annotated[int | None, PATCH] = None
    depth: Annotated[int, DEPTH] = 2
    num_heads: Annotated[int, HEADS] = 4


SPEC = BackboneSpec("vit_small", ViTSmallConfig, "models.vit:vit_small", "vit")

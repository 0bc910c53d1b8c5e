"""Paper A's Tiny-ViT (``backbone: tiny_vit``), declared once.

References:
    [0] ViT, 2020, https://arxiv.org/abs/2010.11929
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from dssl.config.backbones import BackboneSpec
from dssl.config.backbones._ranges import PATCH
from dssl.specs import Options


@dataclass(frozen=True)
class TinyViTConfig(Options):
    """Paper A's [1] Tiny-ViT (its code): a plain ViT [0] at 224 px, patch 14 (16 x 16 tokens), width 320, depth 9,
    16 heads, a class token and fixed 2-D sin-cos position embeddings.

    11.29 M trainable parameters; with MAE's decoder (dim 128, 1 block) 11.60 M, the figure in paper A's Table 2.
    Not to be confused with Microsoft's hierarchical TinyViT. ``patch_size`` must divide the image side.
    """

    patch_size: Annotated[int, PATCH] = 14


SPEC = BackboneSpec("tiny_vit", TinyViTConfig, "models.vit:tiny_vit", "vit")

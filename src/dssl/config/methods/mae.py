"""MAE's hyper-parameters on a ViT (``models.<model>.hparams`` of ``method: mae``), declared once.

References:
    [0] MAE, 2021, https://arxiv.org/abs/2111.06377
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from dssl.config.methods import MethodSpec
from dssl.config.methods._ranges import CROP_MIN_SCALE, MASK_RATIO, PROBABILITY, WIDTH
from dssl.config.ranges import Range
from dssl.specs import Options


@dataclass(frozen=True)
class MAEConfig(Options):
    """MAE [0]: mask ``mask_ratio`` of the patches, encode the visible ones, reconstruct the rest.

    MAE's defaults: mask ratio 0.75, a decoder of 8 blocks of width 512 with 16 heads, ``norm_pix_loss`` as its
    better variant, crop scale (0.2, 1), flip 0.5. This code's defaults: mask ratio 0.75; ``decoder_dim`` 128
    (paper A's [1] Tiny-ViT code) for encoders of width >= 192, else 64; ``decoder_depth`` 1 block;
    ``decoder_heads`` decoder_dim / 8 (16 at 128, MAE's count); ``norm_pix_loss`` off as in paper A.
    """

    mask_ratio: Annotated[float, MASK_RATIO] = 0.75
    decoder_dim: Annotated[int | None, WIDTH] = None
    decoder_depth: Annotated[int, Range(1, 64)] = 1
    decoder_heads: Annotated[int | None, Range(1, 1024)] = None
    norm_pix_loss: bool = False
    crop_min_scale: Annotated[float, CROP_MIN_SCALE] = 0.2
    flip_p: Annotated[float, PROBABILITY] = 0.5


SPEC = MethodSpec("mae", MAEConfig, "methods.mae:MAE")

"""Paper A's MAE for CNNs: its hyper-parameters (``models.<model>.hparams`` of ``method: mae_cnn``), declared once.

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
class MAECNNConfig(Options):
    """Paper A's [1] MAE [0] for CNN encoders: masked patches zeroed in pixel space, a transposed-convolution
    decoder.

    MAE's defaults (on ViTs): mask ratio 0.75 of 16 x 16 patches at 224 px, crop scale (0.2, 1); paper A's CNN
    variant keeps both. This code's defaults: ``mask_ratio`` 0.75; ``mask_patch_size`` 16 px at 224 px scaled
    with the image side, at least 4 px; ``decoder_width`` feature_dim / 2 (256 for ResNet-18), halved at each x2
    upsampling.
    """

    mask_ratio: Annotated[float, MASK_RATIO] = 0.75
    mask_patch_size: Annotated[int | None, Range(1, 1024)] = None
    decoder_width: Annotated[int | None, WIDTH] = None
    crop_min_scale: Annotated[float, CROP_MIN_SCALE] = 0.2
    flip_p: Annotated[float, PROBABILITY] = 0.5


SPEC = MethodSpec("mae_cnn", MAECNNConfig, "methods.mae_cnn:MAECNN")

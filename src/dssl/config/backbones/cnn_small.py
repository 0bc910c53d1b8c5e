"""The small CPU CNN's options (``backbone: cnn_small``), declared once.

This project's own network for the embedded CPU profile (16 x 16 images, 2 cores); no paper's sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from dssl.config.backbones import BackboneSpec
from dssl.config.backbones._ranges import WIDTH
from dssl.specs import Options


@dataclass(frozen=True)
class CNNSmallConfig(Options):
    """A few 3x3 conv-BN-ReLU layers for the CPU-sized embedded profile (16x16, 1 channel).

    ``widths``: each layer's output channels. The first layer keeps the resolution, each later one halves it, so
    the default (32, 64, 128) gives a 16 x 16 input a 128 x 4 x 4 map (stride 4) and 128-d pooled features. Sized
    after the ~530 img/s (forward + backward, batch 64, 2 threads, 16 px) that a 3-layer CNN reaches on the target
    machine.
    """

    widths: Annotated[tuple[int, ...], WIDTH] = (32, 64, 128)


SPEC = BackboneSpec("cnn_small", CNNSmallConfig, "models.cnn:cnn_small", "cnn")

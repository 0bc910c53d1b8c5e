"""SimCLR's hyper-parameters (``models.<model>.hparams`` of ``method: simclr``), declared once.

References:
    [0] SimCLR, 2020, https://arxiv.org/abs/2002.05709
    [1] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [2] L-DAWA, 2023, https://arxiv.org/abs/2307.07393
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from dssl.config.methods import MethodSpec
from dssl.config.methods._ranges import CROP_MIN_SCALE, POSITIVE, PROBABILITY, WIDTH
from dssl.specs import Options


@dataclass(frozen=True)
class SimCLRConfig(Options):
    """SimCLR [0] as paper B's [1] FedSimCLR and FeatARC's local model.

    SimCLR's defaults: a 2-layer MLP head from the 2048-d ResNet-50 feature (hidden 2048) to 128-d, NT-Xent
    ``temperature`` 0.1 on ImageNet and 0.5 on CIFAR-10, crop scale (0.08, 1). This code's defaults: projector
    d-d-d/4 (``None`` widths; 512-512-128 for ResNet-18) and temperature 0.07 (paper B's code). Paper B's code
    projects with its one MLP at 512-4096-2048 (``proj_hidden_dim: 4096, proj_output_dim: 2048``); ``head``:
    ``mlp`` (SimCLR's) or ``linear``, one Linear layer (L-DAWA's [2] code, 512-128).
    """

    proj_hidden_dim: Annotated[int | None, WIDTH] = None
    proj_output_dim: Annotated[int | None, WIDTH] = None
    temperature: Annotated[float, POSITIVE] = 0.07
    crop_min_scale: Annotated[float, CROP_MIN_SCALE] = 0.08
    flip_p: Annotated[float, PROBABILITY] = 0.5
    head: Literal["mlp", "linear"] = "mlp"


SPEC = MethodSpec("simclr", SimCLRConfig, "methods.simclr:SimCLR")

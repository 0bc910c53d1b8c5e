"""SimSiam's hyper-parameters (``models.<model>.hparams`` of ``method: simsiam``), declared once.

References:
    [0] SimSiam, 2020, https://arxiv.org/abs/2011.10566
    [1] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [2] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from dssl.config.methods import MethodSpec
from dssl.config.methods._ranges import CROP_MIN_SCALE, MOMENTUM, PROBABILITY, WIDTH
from dssl.specs import Options


@dataclass(frozen=True)
class SimSiamConfig(Options):
    """SimSiam [0], paper A's [2] contrastive method and paper B's [1] FedSimSiam.

    SimSiam's defaults (ResNet-50): projector 2048-2048-2048, predictor the bottleneck 2048-512-2048, crop scale
    (0.2, 1), no momentum (stop-gradient, no EMA target). ``heads: simsiam`` (default) builds SimSiam's heads at
    paper A's sizes (ResNet-18: projector 512-256-256-512, predictor 512-512-512; ``None`` widths: d - d/2 - d/2 - d
    and d-d-d for feature dimension d); ``heads: fedssl`` paper B's one MLP (d-8d-4d, 4d-8d-4d).
    ``augmentation``: ``simsiam`` (crop scale 0.2) or ``fedssl`` (paper B's, crop scale 0.08); ``crop_min_scale``
    ``None`` takes the augmentation's.

    Paper B's design-space switches (its Section 4): ``predictor`` (without it FedSimSiam collapses),
    ``stop_gradient`` (FedSimSiam needs it), ``ema_target`` (an EMA target moved by ``momentum``, 0.99, which
    makes FedSimSiam BYOL-like), ``target_optimized`` (with an EMA target and no stop-gradient, whether the
    optimiser steps the target). ``flip_p``: the views' flip probability.
    """

    proj_hidden_dim: Annotated[int | None, WIDTH] = None
    proj_output_dim: Annotated[int | None, WIDTH] = None
    pred_hidden_dim: Annotated[int | None, WIDTH] = None
    stop_gradient: bool = True
    crop_min_scale: Annotated[float | None, CROP_MIN_SCALE] = None
    predictor: bool = True
    ema_target: bool = False
    momentum: Annotated[float, MOMENTUM] = 0.99
    flip_p: Annotated[float, PROBABILITY] = 0.5
    target_optimized: bool = True
    heads: Literal["simsiam", "fedssl"] = "simsiam"
    augmentation: Literal["simsiam", "fedssl"] = "simsiam"


SPEC = MethodSpec("simsiam", SimSiamConfig, "methods.simsiam:SimSiam")

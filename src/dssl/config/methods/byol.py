"""BYOL's hyper-parameters (``models.<model>.hparams`` of ``method: byol``), declared once.

References:
    [0] BYOL, 2020, https://arxiv.org/abs/2006.07733
    [1] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from dssl.config.methods import MethodSpec
from dssl.config.methods._ranges import CROP_MIN_SCALE, MOMENTUM, PROBABILITY, WIDTH
from dssl.specs import Options


@dataclass(frozen=True)
class BYOLConfig(Options):
    """BYOL [0] as paper B's [1] FedBYOL / FedEMA local model.

    BYOL's defaults (ResNet-50): projector 2048-4096-256, predictor 256-4096-256, target momentum 0.996 raised
    to 1 by a cosine schedule, crop scale (0.08, 1). Paper B's for ResNet-18: projector 512-4096-2048,
    predictor 2048-4096-2048, constant momentum 0.99, this code's defaults. ``None`` widths are derived from the
    backbone's feature dimension d: ``proj_hidden_dim`` 8d, ``proj_output_dim`` 4d, ``pred_hidden_dim`` the
    projector's hidden width.

    Paper B's design-space switches (its Section 4): ``predictor`` (without it FedBYOL collapses),
    ``stop_gradient`` (false differentiates the target branch; FedBYOL still works), ``ema_target`` (false: the
    target is the online network itself), ``target_optimized`` (with an EMA target and no stop-gradient, whether
    the optimiser steps the target's parameters; paper B's code: false). ``flip_p``: the views' flip probability.
    """

    proj_hidden_dim: Annotated[int | None, WIDTH] = None
    proj_output_dim: Annotated[int | None, WIDTH] = None
    pred_hidden_dim: Annotated[int | None, WIDTH] = None
    momentum: Annotated[float, MOMENTUM] = 0.99
    crop_min_scale: Annotated[float, CROP_MIN_SCALE] = 0.08
    predictor: bool = True
    stop_gradient: bool = True
    ema_target: bool = True
    flip_p: Annotated[float, PROBABILITY] = 0.5
    target_optimized: bool = True


SPEC = MethodSpec("byol", BYOLConfig, "methods.byol:BYOL")

"""BYOL [0] (Grill et al., NeurIPS 2020) as paper B's [1] FedBYOL / FedEMA local model.

BYOL's own sizes [0] (ResNet-50, 2048-d features): projector 2048-4096-256, predictor 256-4096-256 (BN on the
hidden layer), target EMA tau_base = 0.996 raised to 1 by a cosine schedule over training. This code's default
differs as paper B does: a wider output (4d) and a constant momentum 0.99.

Paper B's sizes for ResNet-18: projector 512-4096-2048, predictor 2048-4096-2048, target EMA 0.99.
Defaults keep the ratios for any backbone: projector d-8d-4d, predictor 4d-8d-4d, d = feature_dim
(cnn_small: 128-1024-512, vit_small: 96-768-384).

Paper B's design-space switches (its Section 4 study of the FedSSL framework): ``predictor`` (without
it FedBYOL collapses), ``stop_gradient`` (FedBYOL still works without it), ``ema_target`` (without it
the target is the online network itself, i.e. a SimSiam-style target with BYOL's heads and loss).

References:
    [0] BYOL, 2020, https://arxiv.org/abs/2006.07733
    [1] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
"""

from __future__ import annotations

from dataclasses import asdict, replace

import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.methods.byol import BYOLConfig
from dssl.methods.augment import FedSSLTransform
from dssl.methods.heads import FedSSLMLPHead
from dssl.methods.siamese import SiameseMethod


class BYOLProjectionHead(FedSSLMLPHead):
    """Linear-BN-ReLU-Linear; paper B [1]: 512-4096-2048 (BYOL [0]: 2048-4096-256). The first Linear keeps its
    bias, as in paper B's code: with it, paper A's Table 2 count for FedU / FedEMA (38.47 M) is reproduced."""


class BYOLPredictionHead(FedSSLMLPHead):
    """Linear-BN-ReLU-Linear; paper B [1]: 2048-4096-2048 (BYOL [0]: 256-4096-256); the first Linear with bias,
    as the projector."""

    def __init__(self, input_dim: int = 2048, hidden_dim: int = 4096, output_dim: int = 2048) -> None:
        super().__init__(input_dim, hidden_dim, output_dim)


class BYOLLoss(nn.Module):
    """Symmetrised normalised MSE, ||p/|p| - t/|t| ||^2 = 2 - 2 cos(p, t), summed over both view
    orders and averaged over the batch (BYOL [0], Eq. 2; paper B's [1] code; no hyper-parameter). Targets are not
    differentiated unless ``stop_gradient=False`` (paper B's ablation)."""

    def __init__(self, stop_gradient: bool = True) -> None:
        super().__init__()
        self.stop_gradient = stop_gradient

    def forward(
        self, p1: torch.Tensor, p2: torch.Tensor, t1: torch.Tensor, t2: torch.Tensor
    ) -> torch.Tensor:
        if self.stop_gradient:
            t1, t2 = t1.detach(), t2.detach()
        cos12 = F.cosine_similarity(p1, t2, dim=-1)
        cos21 = F.cosine_similarity(p2, t1, dim=-1)
        return (4 - 2 * cos12 - 2 * cos21).mean()


BYOLTransform = FedSSLTransform  # paper B uses one augmentation for all its methods


class BYOL(SiameseMethod):
    """BYOL [0]: online encoder + projector + predictor against an EMA target encoder + projector
    (:class:`~dssl.methods.siamese.SiameseMethod`; the engine's ``after_optimizer_step`` moves the
    target by ``momentum``, paper B's [1] constant: BYOL's 0.996 -> 1 schedule is not used). Without
    stop-gradient the target branch is differentiated: with an EMA target its parameters become trainable
    (the optimiser steps them, then the EMA pulls them toward the online network); without one the gradient
    flows into the online network through both branches. Options: :class:`BYOLConfig`.
    """

    def __init__(self, encoder: nn.Module, image_size: int, in_chans: int, config: BYOLConfig) -> None:
        del in_chans
        dim = encoder.feature_dim
        proj_hidden_dim = config.proj_hidden_dim or 8 * dim
        c = replace(config, proj_hidden_dim=proj_hidden_dim, proj_output_dim=config.proj_output_dim or 4 * dim,
                    pred_hidden_dim=config.pred_hidden_dim or proj_hidden_dim)
        super().__init__(
            encoder,
            asdict(c),
            projector=BYOLProjectionHead(dim, c.proj_hidden_dim, c.proj_output_dim),
            predictor=BYOLPredictionHead(c.proj_output_dim, c.pred_hidden_dim, c.proj_output_dim)
            if c.predictor else None,
            criterion=BYOLLoss(c.stop_gradient),
            transform=BYOLTransform(image_size, c.crop_min_scale, c.flip_p),
        )

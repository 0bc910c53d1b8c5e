"""SimSiam [0] (Chen & He, CVPR 2021): Siamese views, a predictor, and stop-gradient, no negatives.

SimSiam's own sizes [0] (ResNet-50, 2048-d features): projector 2048-2048-2048 (3 layers, BN on every layer, no
ReLU after the output), predictor 2048-512-2048 (a bottleneck, BN on its hidden layer only); no temperature and
no momentum (stop-gradient, no EMA target). This code's default differs: paper A's [2] sizes below, whose
predictor has no bottleneck.

Paper A's [2] sizes for ResNet-18 [code]: projector 512-256-256-512, predictor 512-512-512. Defaults keep
those ratios for any backbone: projector d - d/2 - d/2 - d, predictor d - d - d, d = feature_dim
(cnn_small: 128-64-64-128 / 128-128-128; vit_small: 96-48-48-96 / 96-96-96; tiny_vit: 320-...).

Paper B's [1] design-space switches (its Section 4 study of the FedSSL framework): ``predictor`` (without
it FedSimSiam collapses), ``stop_gradient`` (FedSimSiam needs it), ``ema_target`` (an EMA target
encoder + projector, ``momentum``, which makes FedSimSiam BYOL-like).

Paper B's FedSimSiam (its code) is not SimSiam's network: ``heads: fedssl`` gives it paper B's one MLP
(``FedSSLMLPHead``, Linear-BN-ReLU-Linear) as projector 512-4096-2048 and predictor 2048-4096-2048
(d-8d-4d and 4d-8d-4d for any backbone), and ``augmentation: fedssl`` paper B's one augmentation
(``FedSSLTransform``: crop scale (0.08, 1), jitter (0.8, 0.8, 0.8, 0.2)); the defaults (``simsiam``) are
SimSiam's heads with paper A's sizes and SimSiam's augmentation, crop scale (0.2, 1).

References:
    [0] SimSiam, 2020, https://arxiv.org/abs/2011.10566
    [1] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [2] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

from dataclasses import asdict, replace

import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.methods.simsiam import SimSiamConfig
from dssl.methods.augment import FedSSLTransform, ViewTransform
from dssl.methods.heads import FedSSLMLPHead, mlp_layers
from dssl.methods.siamese import SiameseMethod


class SimSiamProjectionHead(nn.Sequential):
    """3-layer MLP, BN on every layer (non-affine on the output), ReLU between; paper A [2]: 512-256-256-512
    (this code's default, d - d/2 - d/2 - d), SimSiam [0]: 2048-2048-2048."""

    def __init__(self, input_dim: int = 512, hidden_dim: int = 256, output_dim: int = 512) -> None:
        super().__init__(*mlp_layers([input_dim, hidden_dim, hidden_dim, output_dim], output_bn=True))


class SimSiamPredictionHead(nn.Sequential):
    """2-layer MLP Linear-BN-ReLU-Linear; paper A [2]: 512-512-512 (this code's default, d-d-d; SimSiam's own
    [0]: the bottleneck 2048-512-2048)."""

    def __init__(self, input_dim: int = 512, hidden_dim: int = 512, output_dim: int = 512) -> None:
        super().__init__(*mlp_layers([input_dim, hidden_dim, output_dim]))


def negative_cosine(p: torch.Tensor, z: torch.Tensor, stop_gradient: bool = True) -> torch.Tensor:
    """D(p, z) = -mean_b cos(p_b, z_b), with ``z`` detached under stop-gradient (SimSiam Eq. 1)."""
    if stop_gradient:
        z = z.detach()
    return -F.cosine_similarity(p, z, dim=-1).mean()


class NegativeCosineLoss(nn.Module):
    """Symmetrised SimSiam loss L = D(p1, z2) / 2 + D(p2, z1) / 2 (SimSiam [0], Eq. 2; no hyper-parameter).

    ``stop_gradient=False`` is paper B's [1] ablation (FedSimSiam collapses without it).
    """

    def __init__(self, stop_gradient: bool = True) -> None:
        super().__init__()
        self.stop_gradient = stop_gradient

    def forward(
        self, p1: torch.Tensor, p2: torch.Tensor, z1: torch.Tensor, z2: torch.Tensor
    ) -> torch.Tensor:
        sg = self.stop_gradient
        return 0.5 * negative_cosine(p1, z2, sg) + 0.5 * negative_cosine(p2, z1, sg)


class SimSiamTransform(ViewTransform):
    """SimSiam's augmentation, batched: crop scale (0.2, 1), flip, colour jitter (0.4, 0.4, 0.4, 0.1)
    p 0.8, grayscale p 0.2, Gaussian blur p 0.5 for ImageNet-sized images (>= 64 px; SimSiam's CIFAR
    recipe has no blur)."""

    def __init__(self, image_size: int, crop_min_scale: float = 0.2, flip_p: float = 0.5) -> None:
        super().__init__(
            image_size,
            crop_scale=(crop_min_scale, 1.0),
            flip_p=flip_p,
            jitter=(0.4, 0.4, 0.4, 0.1),
            jitter_p=0.8,
            grayscale_p=0.2,
            blur_p=0.5 if image_size >= 64 else 0.0,
        )


# augmentation -> (its view transform, its default crop_min_scale)
AUGMENTATIONS: dict[str, tuple[type[ViewTransform], float]] = {"simsiam": (SimSiamTransform, 0.2),
                                                              "fedssl": (FedSSLTransform, 0.08)}


def output_std(z: torch.Tensor) -> torch.Tensor:
    """Mean per-dimension std of l2-normalised outputs: ~1/sqrt(d) when healthy, 0 at collapse
    (SimSiam Fig. 2); a detached diagnostic."""
    return F.normalize(z.detach(), dim=-1).std(dim=0).mean()


class SimSiam(SiameseMethod):
    """SimSiam [0]: encoder + projector f, predictor h; loss on two views with stop-gradient
    (:class:`~dssl.methods.siamese.SiameseMethod`). With an EMA target the target branch is an EMA
    of the encoder + projector, moved by ``momentum`` after every optimiser step. Logs
    ``output_std`` beside the loss (SimSiam's collapse diagnostic). Paper A's [2] contrastive method and
    paper B's [1] FedSimSiam; the papers' sizes and where the defaults depart from them: see the module and
    :class:`SimSiamConfig`.
    """

    def __init__(self, encoder: nn.Module, image_size: int, in_chans: int, config: SimSiamConfig) -> None:
        del in_chans  # the views keep the input's channels
        dim = encoder.feature_dim
        fedssl = config.heads == "fedssl"
        proj_output_dim = config.proj_output_dim or (4 * dim if fedssl else dim)
        transform, default_crop = AUGMENTATIONS[config.augmentation]
        c = replace(config, proj_hidden_dim=config.proj_hidden_dim or (8 * dim if fedssl else dim // 2),
                    proj_output_dim=proj_output_dim,
                    pred_hidden_dim=config.pred_hidden_dim or (8 * dim if fedssl else proj_output_dim),
                    crop_min_scale=default_crop if config.crop_min_scale is None else config.crop_min_scale)
        projector, predictor_head = (FedSSLMLPHead, FedSSLMLPHead) if fedssl else (SimSiamProjectionHead,
                                                                                   SimSiamPredictionHead)
        super().__init__(
            encoder,
            asdict(c),
            projector=projector(dim, c.proj_hidden_dim, c.proj_output_dim),
            predictor=predictor_head(c.proj_output_dim, c.pred_hidden_dim, c.proj_output_dim) if c.predictor else None,
            criterion=NegativeCosineLoss(c.stop_gradient),
            transform=transform(image_size, c.crop_min_scale, c.flip_p),
        )

    def diagnostics(self, z1: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"output_std": output_std(z1)}

"""SimCLR [0] (Chen et al., ICML 2020) as paper B's [1] FedSimCLR.

SimCLR's own sizes [0]: a 2-layer MLP head from the 2048-d ResNet-50 feature (hidden 2048) to 128-d, NT-Xent
temperature 0.1 on ImageNet and 0.5 on CIFAR-10. Defaults: projector d-d-d/4 (512-512-128 for ResNet-18;
cnn_small 128-128-32, vit_small 96-96-24); NT-Xent temperature 0.07 (paper B's code, which differs from
SimCLR's). Paper B's code projects with its one MLP at 512-4096-2048 (``proj_hidden_dim: 4096,
proj_output_dim: 2048``); L-DAWA's [2] code with one Linear layer 512-128 (``head: linear``).

References:
    [0] SimCLR, 2020, https://arxiv.org/abs/2002.05709
    [1] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [2] L-DAWA, 2023, https://arxiv.org/abs/2307.07393
"""

from __future__ import annotations

from dataclasses import asdict, replace

import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.methods.simclr import SimCLRConfig
from dssl.methods.augment import FedSSLTransform
from dssl.methods.base import LossOutput, SSLMethod
from dssl.methods.heads import mlp_layers


class SimCLRProjectionHead(nn.Sequential):
    """Linear-BN-ReLU-Linear; 512-512-128 for ResNet-18 (SimCLR [0]: 2048-2048-128 on ResNet-50)."""

    def __init__(self, input_dim: int = 512, hidden_dim: int = 512, output_dim: int = 128) -> None:
        super().__init__(*mlp_layers([input_dim, hidden_dim, output_dim]))


class NTXentLoss(nn.Module):
    """Normalised-temperature cross-entropy over 2B views (SimCLR [0], Eq. 1): each view's positive is
    the other view of its image, its negatives the other 2B - 2 views. Temperature: 0.07 by default (paper B's
    [1] code), 0.1 / 0.5 in SimCLR's ImageNet / CIFAR-10 runs."""

    def __init__(self, temperature: float = 0.07) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        z = F.normalize(torch.cat([z1, z2]), dim=-1)
        n = z1.shape[0]
        logits = z @ z.T / self.temperature
        self_pairs = torch.eye(2 * n, dtype=torch.bool, device=z.device)
        logits = logits.masked_fill(self_pairs, float("-inf"))
        positives = torch.arange(2 * n, device=z.device).roll(n)
        return F.cross_entropy(logits, positives)


SimCLRTransform = FedSSLTransform  # paper B uses one augmentation for all its methods


class SimCLR(SSLMethod):
    """SimCLR [0]: encoder + projector, contrastive NT-Xent on two views; no predictor, no target. Paper B's [1]
    FedSimCLR and the local model of FeatARC; sizes and temperatures: see the module and :class:`SimCLRConfig`."""

    def __init__(self, encoder: nn.Module, image_size: int, in_chans: int, config: SimCLRConfig) -> None:
        del in_chans
        dim = encoder.feature_dim
        c = replace(config, proj_hidden_dim=config.proj_hidden_dim or dim,
                    proj_output_dim=config.proj_output_dim or dim // 4)
        super().__init__(encoder, asdict(c))
        self.projector: nn.Module = (SimCLRProjectionHead(dim, c.proj_hidden_dim, c.proj_output_dim)
                                     if c.head == "mlp" else nn.Sequential(nn.Linear(dim, c.proj_output_dim)))
        self.criterion = NTXentLoss(c.temperature)
        self.transform = SimCLRTransform(image_size, c.crop_min_scale, c.flip_p)

    def project_views(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Two views of ``images`` through encoder and projector: (f1, z1, z2), the first view's
        features and both views' projections (FeatARC adds a term on the projections)."""
        x1, x2 = self.transform(images, generator), self.transform(images, generator)
        f1 = self.encoder(x1)
        return f1, self.projector(f1), self.projector(self.encoder(x2))

    def compute_loss(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> LossOutput:
        f1, z1, z2 = self.project_views(images, generator)
        return LossOutput({"loss": self.criterion(z1, z2)}, representation=f1)

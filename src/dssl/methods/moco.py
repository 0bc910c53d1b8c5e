"""MoCo v1 (He et al., CVPR 2020) and v2 (Chen, Fan, Girshick & He, 2020) as paper B's FedMoCo.

Paper B's sizes for ResNet-18: queue 4096, dim 128, key-encoder momentum 0.99; v1: linear head
512-128, temperature 0.07; v2: MLP head 512-512-128, temperature 0.2. Defaults for any backbone:
head d-(d-)d/4, queue 32 x (d/4) (4096 at d = 512; cnn_small 1024, vit_small 768).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from dssl.methods.augment import FedSSLTransform
from dssl.methods.base import LossOutput, SSLMethod, ema_update, register_method
from dssl.methods.heads import mlp_layers


class MoCoProjectionHead(nn.Sequential):
    """MoCo v2's MLP head Linear-ReLU-Linear (no BN); 512-512-128 for ResNet-18."""

    def __init__(self, input_dim: int = 512, hidden_dim: int = 512, output_dim: int = 128) -> None:
        super().__init__(*mlp_layers([input_dim, hidden_dim, output_dim], hidden_bn=False))


MOCO_VERSIONS = {"v1": 0.07, "v2": 0.2}  # version -> paper B's temperature


class InfoNCELoss(nn.Module):
    """MoCo's InfoNCE: for each query, one positive key against the queue of negatives (MoCo Eq. 1).

    Inputs are l2-normalised: q, k [B, D], queue [D, K].
    """

    def __init__(self, temperature: float = 0.2) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, q: torch.Tensor, k: torch.Tensor, queue: torch.Tensor) -> torch.Tensor:
        positive = (q * k.detach()).sum(dim=-1, keepdim=True)
        negatives = q @ queue.detach()
        logits = torch.cat([positive, negatives], dim=1) / self.temperature
        return F.cross_entropy(logits, torch.zeros(q.shape[0], dtype=torch.long, device=q.device))


MoCoTransform = FedSSLTransform  # paper B uses one augmentation for all its methods


@register_method
class MoCo(SSLMethod):
    """MoCo: query encoder + head, momentum key encoder + head, a FIFO queue of past keys.

    ``version``: ``v2`` (MLP head, temperature 0.2; the default) or ``v1`` (linear head, 0.07);
    ``temperature`` overrides the version's. The engine calls :meth:`after_optimizer_step`, which
    moves the key networks by ``momentum``. Key networks and queue are per-client memory
    (``target_sources``, ``memory_modules``): every strategy keeps them on the client.
    """

    name = "moco"
    target_sources = {"key_encoder": "encoder", "key_projector": "projector"}
    memory_modules = ("queue", "queue_ptr")

    def __init__(
        self,
        encoder: nn.Module,
        image_size: int,
        in_chans: int,
        *,
        proj_hidden_dim: int | None = None,
        proj_output_dim: int | None = None,
        queue_size: int | None = None,
        momentum: float = 0.99,
        temperature: float | None = None,
        crop_min_scale: float = 0.08,
        version: str = "v2",
        flip_p: float = 0.5,
    ) -> None:
        del in_chans
        if version not in MOCO_VERSIONS:
            raise ValueError(f"unknown MoCo version {version!r}; known: {', '.join(MOCO_VERSIONS)}")
        temperature = MOCO_VERSIONS[version] if temperature is None else temperature
        dim = encoder.feature_dim
        proj_hidden_dim = proj_hidden_dim or dim
        proj_output_dim = proj_output_dim or dim // 4
        queue_size = queue_size or 32 * proj_output_dim
        super().__init__(
            encoder,
            dict(
                proj_hidden_dim=proj_hidden_dim,
                proj_output_dim=proj_output_dim,
                queue_size=queue_size,
                momentum=momentum,
                temperature=temperature,
                crop_min_scale=crop_min_scale,
                version=version,
                flip_p=flip_p,
            ),
        )
        self.momentum = momentum
        self.projector = (MoCoProjectionHead(dim, proj_hidden_dim, proj_output_dim) if version == "v2"
                          else nn.Sequential(nn.Linear(dim, proj_output_dim)))
        self.key_encoder = copy.deepcopy(encoder).requires_grad_(False)
        self.key_projector = copy.deepcopy(self.projector).requires_grad_(False)
        self.register_buffer("queue", F.normalize(torch.randn(proj_output_dim, queue_size), dim=0))
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        self.criterion = InfoNCELoss(temperature)
        self.transform = MoCoTransform(image_size, crop_min_scale, flip_p)

    def compute_loss(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> LossOutput:
        x1, x2 = self.transform(images, generator), self.transform(images, generator)
        f1 = self.encoder(x1)
        q = F.normalize(self.projector(f1), dim=-1)
        with torch.no_grad():
            k = F.normalize(self.key_projector(self.key_encoder(x2)), dim=-1)
        # The loss reads a copy: the queue is updated in place right after.
        loss = self.criterion(q, k, self.queue.clone())
        self.enqueue(k)
        return LossOutput({"loss": loss}, representation=f1)

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Write ``keys`` [B, D] over the oldest queue entries (wrapping around)."""
        size = self.queue.shape[1]
        slots = (self.queue_ptr + torch.arange(keys.shape[0], device=keys.device)) % size
        self.queue[:, slots] = keys.T
        self.queue_ptr.copy_((self.queue_ptr + keys.shape[0]) % size)

    def update_target(self, momentum: float) -> None:
        """key <- momentum * key + (1 - momentum) * query (encoder and head)."""
        ema_update(self.key_encoder, self.encoder, momentum)
        ema_update(self.key_projector, self.projector, momentum)

    def after_optimizer_step(self) -> None:
        self.update_target(self.momentum)

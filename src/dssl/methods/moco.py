"""MoCo v1 [0] (He et al., CVPR 2020) and v2 [1] (Chen, Fan, Girshick & He, 2020) as paper B's [2] FedMoCo.

MoCo's own sizes [0, 1] (ResNet-50, 2048-d features): key dimension 128, queue K = 65536, key-encoder momentum
0.999; temperature 0.07 with a linear head (v1), 0.2 with a 2048-2048-128 MLP head (v2). This code's default
differs as paper B does: a queue of 4096 (32 x d/4) and momentum 0.99.

Paper B's sizes for ResNet-18: queue 4096, dim 128, key-encoder momentum 0.99; v1: linear head
512-128, temperature 0.07; v2: MLP head 512-512-128, temperature 0.2. Defaults for any backbone:
head d-(d-)d/4, queue 32 x (d/4) (4096 at d = 512; cnn_small 1024, vit_small 768).

The defaults are MoCo's own definition (its papers): one loss direction (a query of view 1 against the
key of view 2), a v2 head without BN, the key encoder an EMA of the query encoder, and the queue
a FIFO of past keys. In federated training the key networks and the queue are per-client memory that
persists between a client's rounds (a design choice: a client's negatives are its own past keys, never
another client's). Paper B's released code (EasyFL ``applications/fedssl``) departs in five ways, each a
hyper-parameter here that paper B's profile sets:

``symmetric``          both view orders, loss_12 + loss_21, and both batches of keys enqueued (code: on);
``head_bn``            v2's MLP head with BN, Linear-BN-ReLU-Linear (``FedSSLMLPHead``; code: on);
``jitter_strength``    the colour-jitter strength s of paper B's augmentation; the code's v1 uses its
                       MoCo transform, jitter (0.4, 0.4, 0.4, 0.1) = s 0.5 (v2 and the default: 1.0);
``reset_key_encoder``  the key encoder and head copied from the query ones at the start of every round
                       a client trains (code: on, ``reset_key_encoder`` in its ``train``);
``reset_queue``        the queue (and its pointer) restarted every round from the initial, server-side
                       one (code: on -- every download overwrites a client's buffers with the server's,
                       whose queue never changes).
The code's v1 also trains at a constant learning rate (the others follow the cosine schedule): an optimizer
setting, carried by the training recipe of the strategy entry its rows use.

References:
    [0] MoCo v1, 2019, https://arxiv.org/abs/1911.05722
    [1] MoCo v2, 2020, https://arxiv.org/abs/2003.04297
    [2] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
"""

from __future__ import annotations

import copy
from dataclasses import asdict, replace

import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.methods.moco import MoCoConfig
from dssl.methods.augment import FedSSLTransform
from dssl.methods.base import LossOutput, SSLMethod, ema_update
from dssl.methods.heads import FedSSLMLPHead, mlp_layers


class MoCoProjectionHead(nn.Sequential):
    """MoCo v2's [1] MLP head Linear-ReLU-Linear (no BN); 512-512-128 for ResNet-18 (MoCo v2: 2048-2048-128 on
    ResNet-50)."""

    def __init__(self, input_dim: int = 512, hidden_dim: int = 512, output_dim: int = 128) -> None:
        super().__init__(*mlp_layers([input_dim, hidden_dim, output_dim], hidden_bn=False))


MOCO_VERSIONS = {"v1": 0.07, "v2": 0.2}  # version -> paper B's temperature


class InfoNCELoss(nn.Module):
    """MoCo's InfoNCE: for each query, one positive key against the queue of negatives (MoCo [0], Eq. 1);
    temperature 0.07 in v1 [0], 0.2 in v2 [1].

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


class MoCo(SSLMethod):
    """MoCo [0, 1]: query encoder + head, momentum key encoder + head, a FIFO queue of past keys; ``version`` v2
    (MLP head) or v1 (linear head), sizes and paper B's [2] departures: :class:`MoCoConfig`. The engine calls
    :meth:`after_optimizer_step`, which moves the key networks by ``momentum``. Key networks and queue are
    per-client memory (``target_sources``, ``memory_modules``): every strategy keeps them on the client.
    """

    target_sources = {"key_encoder": "encoder", "key_projector": "projector"}
    memory_modules = ("queue", "queue_ptr")

    def __init__(self, encoder: nn.Module, image_size: int, in_chans: int, config: MoCoConfig) -> None:
        del in_chans
        dim = encoder.feature_dim
        proj_output_dim = config.proj_output_dim or dim // 4
        c = replace(config, proj_hidden_dim=config.proj_hidden_dim or dim, proj_output_dim=proj_output_dim,
                    queue_size=config.queue_size or 32 * proj_output_dim,
                    temperature=MOCO_VERSIONS[config.version] if config.temperature is None else config.temperature,
                    jitter_strength=float(config.jitter_strength))
        super().__init__(encoder, asdict(c))
        self.momentum = c.momentum
        self.symmetric = bool(c.symmetric)
        if c.version == "v1":
            self.projector: nn.Module = nn.Sequential(nn.Linear(dim, c.proj_output_dim))
        elif c.head_bn:
            self.projector = FedSSLMLPHead(dim, c.proj_hidden_dim, c.proj_output_dim)
        else:
            self.projector = MoCoProjectionHead(dim, c.proj_hidden_dim, c.proj_output_dim)
        self.key_encoder = copy.deepcopy(encoder).requires_grad_(False)
        self.key_projector = copy.deepcopy(self.projector).requires_grad_(False)
        self.register_buffer("queue", F.normalize(torch.randn(c.proj_output_dim, c.queue_size), dim=0))
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        self.criterion = InfoNCELoss(c.temperature)
        self.transform = MoCoTransform(image_size, c.crop_min_scale, c.flip_p, config.jitter_strength)

    def compute_loss(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> LossOutput:
        x1, x2 = self.transform(images, generator), self.transform(images, generator)
        f1 = self.encoder(x1)
        q1 = F.normalize(self.projector(f1), dim=-1)
        queue = self.queue.clone()   # the loss reads a copy: the queue is updated in place right after
        k2 = self.keys(x2)
        loss = self.criterion(q1, k2, queue)
        if not self.symmetric:
            self.enqueue(k2)
            return LossOutput({"loss": loss}, representation=f1)
        q2, k1 = F.normalize(self.projector(self.encoder(x2)), dim=-1), self.keys(x1)
        self.enqueue(torch.cat([k1, k2]))   # paper B's code: both directions' keys, view 1's first
        return LossOutput({"loss": loss + self.criterion(q2, k1, queue)}, representation=f1)

    @torch.no_grad()
    def keys(self, views: torch.Tensor) -> torch.Tensor:
        """l2-normalised key projections of ``views`` (no gradient)."""
        return F.normalize(self.key_projector(self.key_encoder(views)), dim=-1)

    def round_memory_keys(self) -> list[str]:
        """The key networks with ``reset_key_encoder`` and the queue with ``reset_queue``: memory that starts
        every round as at a client's first (paper B's code)."""
        parts = (["target"] if self.hparams["reset_key_encoder"] else []) + (
            ["memory"] if self.hparams["reset_queue"] else [])
        return [key for part in parts for key in self.part_keys(part)]

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Write ``keys`` [B, D] over the oldest queue entries (wrapping around)."""
        size = self.queue.shape[1]
        slots = (self.queue_ptr + torch.arange(keys.shape[0], device=keys.device)) % size
        self.queue[:, slots] = keys.T.to(self.queue.dtype)  # bf16 keys under autocast; the queue stays fp32
        self.queue_ptr.copy_((self.queue_ptr + keys.shape[0]) % size)

    def update_target(self, momentum: float) -> None:
        """key <- momentum * key + (1 - momentum) * query (encoder and head)."""
        ema_update(self.key_encoder, self.encoder, momentum)
        ema_update(self.key_projector, self.projector, momentum)

    def after_optimizer_step(self) -> None:
        self.update_target(self.momentum)

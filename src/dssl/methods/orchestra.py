"""Orchestra's local model (Lubana et al., "Orchestra: Unsupervised Federated Learning via Globally
Consistent Clustering", ICML 2022) [0], trained by the ``orchestra`` FL strategy.

An online encoder + projector and an EMA target of both (momentum 0.996). The server holds G = 128
global centroids (unit rows, the ``centroids`` buffer, broadcast with the model and never trained by
clients). On a batch the local loss is

    L = -1/B sum_i sum_k P_ik log softmax(<z2_i, G_k> / T)  +  rotation_weight * CE(r(x3), angle)

with z2 the normalised online projection of view 2, P the target's assignment of view 1 over the
global centroids (``target_assignment``: ``softmax`` of <t1, G_k> / T as in the released code, or
``sinkhorn``: Sinkhorn-Knopp's equal-size assignment, as in SwAV [1]), T = 0.1, and the second term the paper's
degeneracy regulariser: a linear head on the online projection of a third view, rotated by a random
multiple of 90 degrees, predicts the rotation (4 classes; the code's ``deg_layer``). Each client keeps
a FIFO memory of its last M = 128 normalised target projections (``memory``, per-client memory, never
shared); after local training it clusters the memory into L = 16 equal-size local centroids
(:func:`local_clustering`), which the strategy uploads for the server's global-centroid fit.

Paper sizes (ResNet-18, 512-d features; the released code's ``config.py``): projector
512-512-512 (Linear-BN-ReLU-Linear-BN without affine, no biases), 128 global / 16 local centroids,
memory 128, T 0.1, EMA 0.996 (BYOL's [2] base momentum), Sinkhorn temperature 1/25 = 0.04, all this code's
defaults. The projector differs only off ResNet-18: the defaults keep it at the backbone's width d (d-d-d);
scaled sizes are options. The views follow the code's Orchestra
augmentation (crop scale (0.5, 1), flip, colour jitter (0.4, 0.4, 0.2, 0.1) p 0.8, grayscale p 0.2,
blur p 0.5), one transform for all three views (the code adds solarisation to view 2).

``local_target``: the code's cross-device clients are stateless, so the EMA target travels with the
model and is averaged like the online network (the default); ``True`` keeps it on each client as this
project's other EMA-target methods do (first participation copies the received online network).

References:
    [0] Orchestra, 2022, https://arxiv.org/abs/2205.11506
    [1] SwAV, 2020, https://arxiv.org/abs/2006.09882
    [2] BYOL, 2020, https://arxiv.org/abs/2006.07733
"""

from __future__ import annotations

from dataclasses import asdict, replace

import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.methods.orchestra import OrchestraConfig
from dssl.methods.augment import ViewTransform
from dssl.methods.base import LossOutput, SSLMethod, ema_update, make_ema_target
from dssl.methods.heads import mlp_layers
from dssl.methods.sinkhorn import sinkhorn_knopp

ROTATIONS = 4  # 0, 90, 180, 270 degrees


class OrchestraProjectionHead(nn.Sequential):
    """Linear-BN-ReLU-Linear-BN(non-affine), no biases; Orchestra's [0] code: 512-512-512 (this code's default:
    d-d-d, the same on ResNet-18)."""

    def __init__(self, input_dim: int = 512, hidden_dim: int = 512, output_dim: int = 512) -> None:
        super().__init__(*mlp_layers([input_dim, hidden_dim, output_dim], output_bn=True))


class OrchestraTransform(ViewTransform):
    """The released code's Orchestra view: crop (0.5, 1), flip, jitter (0.4, 0.4, 0.2, 0.1) p 0.8,
    grayscale p 0.2, Gaussian blur p 0.5."""

    def __init__(self, image_size: int, crop_min_scale: float = 0.5, flip_p: float = 0.5) -> None:
        super().__init__(image_size, crop_scale=(crop_min_scale, 1.0), flip_p=flip_p,
                         jitter=(0.4, 0.4, 0.2, 0.1), jitter_p=0.8, grayscale_p=0.2, blur_p=0.5)


def rotate_batch(images: torch.Tensor, quarter_turns: torch.Tensor) -> torch.Tensor:
    """Each image [C, H, W] of the batch rotated by its number of quarter turns (0-3), counter-clockwise."""
    rotated = images.clone()
    for k in range(1, ROTATIONS):
        chosen = quarter_turns == k
        if chosen.any():
            rotated[chosen] = torch.rot90(images[chosen], k, dims=(2, 3))
    return rotated


def cluster_loss(online_logits: torch.Tensor, target_assignment: torch.Tensor) -> torch.Tensor:
    """Cross-entropy -1/B sum_i sum_k P_ik log softmax(logits)_ik; P is not differentiated."""
    return -(target_assignment.detach() * F.log_softmax(online_logits, dim=1)).sum(dim=1).mean()


@torch.no_grad()
def local_clustering(memory: torch.Tensor, num_centroids: int, generator: torch.Generator | None = None,
                     iterations: int = 5, sinkhorn_temperature: float = 0.04,
                     sinkhorn_iters: int = 10) -> torch.Tensor:
    """Orchestra's client clustering: equal-size k-means on the unit rows of ``memory`` [M, D].

    Start from ``num_centroids`` distinct memory rows drawn at random; ``iterations`` times assign
    each row to the centroid of largest Sinkhorn-Knopp mass (equal-size clusters, K-anonymity) and move
    each centroid to the normalised mean of its rows (an empty cluster takes a random row). Code: 5
    iterations of 10 Sinkhorn iterations at temperature 1/25. Returns [num_centroids, D].
    """
    rows = memory.shape[0]
    if not 1 <= num_centroids <= rows:
        raise ValueError(f"need 1 <= local centroids <= memory rows, got {num_centroids} and {rows}")
    device = memory.device
    start = torch.randperm(rows, generator=generator, device=device if generator is None else generator.device)
    centroids = memory[start[:num_centroids].to(device)].clone()
    for _ in range(iterations):
        scores = sinkhorn_knopp(memory @ centroids.T, sinkhorn_temperature, max_iters=sinkhorn_iters)
        nearest = scores.argmax(dim=1)
        for j in range(num_centroids):
            members = memory[nearest == j]
            if members.shape[0] == 0:
                pick = torch.randint(rows, (1,), generator=generator,
                                     device=device if generator is None else generator.device)
                members = memory[pick.to(device)]
            centroids[j] = F.normalize(members.mean(dim=0), dim=0)
    return centroids


class Orchestra(SSLMethod):
    """Orchestra [0]: online encoder + projector + rotation head, EMA target, global centroids and a projection
    memory. Options, the paper's code's defaults: :class:`OrchestraConfig`.

    The ``orchestra`` strategy fills the memory at a client's first participation
    (:meth:`fill_memory`), reads the local centroids after training (:meth:`local_centroids`) and
    fits ``centroids`` on the server; :meth:`compute_loss` pushes each batch's target projections
    of view 1 into the memory.
    """

    target_sources = {"target_encoder": "encoder", "target_projector": "projector"}
    memory_modules = ("memory",)

    def __init__(self, encoder: nn.Module, image_size: int, in_chans: int, config: OrchestraConfig) -> None:
        del in_chans
        dim = encoder.feature_dim
        c = replace(config, proj_hidden_dim=config.proj_hidden_dim or dim,
                    proj_output_dim=config.proj_output_dim or dim)
        super().__init__(encoder, asdict(c))
        if not c.local_target:  # the target is part of the shared model (stateless clients)
            self.target_sources = {}
        self.temperature = c.temperature
        self.sinkhorn_temperature = c.sinkhorn_temperature
        self.momentum = c.momentum
        self.rotation_weight = c.rotation_weight
        self.target_assignment = c.target_assignment
        self.num_local_centroids = c.num_local_centroids
        self.projector = OrchestraProjectionHead(dim, c.proj_hidden_dim, c.proj_output_dim)
        self.rotation_head = nn.Linear(c.proj_output_dim, ROTATIONS)
        self.target_encoder, self.target_projector = make_ema_target(encoder, self.projector, True)
        self.register_buffer("centroids", F.normalize(torch.randn(c.num_global_centroids, c.proj_output_dim), dim=1))
        self.register_buffer("memory", torch.zeros(c.memory_size, c.proj_output_dim))
        self.transform = OrchestraTransform(image_size, c.crop_min_scale, c.flip_p)

    # -- projections and assignments --------------------------------------------------------------

    def online_projection(self, views: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.projector(self.encoder(views)), dim=1)

    @torch.no_grad()
    def target_projection(self, views: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.target_projector(self.target_encoder(views)), dim=1)

    @torch.no_grad()
    def assign(self, projections: torch.Tensor) -> torch.Tensor:
        """The target's soft assignment [B, K] of unit projections over the global centroids."""
        similarities = projections @ self.centroids.T
        if self.target_assignment == "sinkhorn":
            return sinkhorn_knopp(similarities, self.sinkhorn_temperature)
        return torch.softmax(similarities / self.temperature, dim=1)

    # -- the loss ---------------------------------------------------------------------------------

    def compute_loss(self, images: torch.Tensor, generator: torch.Generator | None = None) -> LossOutput:
        x1, x2 = self.transform(images, generator), self.transform(images, generator)
        turns = torch.randint(ROTATIONS, (images.shape[0],), generator=generator,
                              device=images.device if generator is None else generator.device).to(images.device)
        x3 = rotate_batch(self.transform(images, generator), turns)
        f2 = self.encoder(x2)
        z2 = F.normalize(self.projector(f2), dim=1)
        t1 = self.target_projection(x1)
        clustering = cluster_loss(z2 @ self.centroids.T / self.temperature, self.assign(t1))
        rotation = F.cross_entropy(self.rotation_head(self.projector(self.encoder(x3))), turns)
        self.push_memory(t1)
        loss = clustering + self.rotation_weight * rotation
        return LossOutput({"loss": loss, "cluster_loss": clustering.detach(), "rotation_loss": rotation.detach()},
                          representation=f2)

    # -- the memory and the local centroids -------------------------------------------------------

    @torch.no_grad()
    def push_memory(self, projections: torch.Tensor) -> None:
        """FIFO: drop the oldest rows, append ``projections`` (the newest rows are last)."""
        size = self.memory.shape[0]
        merged = torch.cat([self.memory, projections.detach().to(self.memory.dtype)])[-size:]
        self.memory.copy_(merged)

    @torch.no_grad()
    def fill_memory(self, images: torch.Tensor, generator: torch.Generator | None = None) -> None:
        """Replace the memory by the target projections of one view of ``images`` (memory_size of
        them). The target's BN statistics are restored afterwards, as in the code."""
        size = self.memory.shape[0]
        if images.shape[0] != size:
            raise ValueError(f"fill_memory needs {size} images (memory_size), got {images.shape[0]}")
        modules = (self.target_encoder, self.target_projector)
        saved = [{k: v.clone() for k, v in m.named_buffers()} for m in modules]
        modes = [m.training for m in modules]
        for m in modules:
            m.train()
        self.memory.copy_(self.target_projection(self.transform(images, generator)))
        for m, buffers, mode in zip(modules, saved, modes):
            for name, value in m.named_buffers():
                value.copy_(buffers[name])
            m.train(mode)

    def local_centroids(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """The client's equal-size clustering of its memory, [num_local_centroids, D]."""
        return local_clustering(self.memory, self.num_local_centroids, generator,
                                sinkhorn_temperature=self.sinkhorn_temperature)

    def after_optimizer_step(self) -> None:
        ema_update(self.target_encoder, self.encoder, self.momentum)
        ema_update(self.target_projector, self.projector, self.momentum)

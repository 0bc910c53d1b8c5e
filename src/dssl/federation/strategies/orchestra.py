"""Orchestra [0] (Lubana et al., ICML 2022): FedAvg plus a federated clustering of the projections.

The local model is the ``orchestra`` method (``dssl.methods.orchestra``). One FL round:

1. a client at its first participation fills its projection memory with the target projections of
   ``memory_size`` of its samples (one view each; the code's ``reset_memory``);
2. it trains E local epochs on the clustering + rotation loss against the global centroids it received
   (round 0 trains nothing: it only initialises the centroids, as in the released code);
3. it clusters its memory into ``num_local_centroids`` equal-size local centroids (Sinkhorn-Knopp
   k-means) and uploads them with its weights (``Upload.extras["local_centroids"]``); the memory stays
   on the client;
4. the server averages the weights (FedAvg) and fits the global centroids to all uploaded local
   centroids (:func:`fit_global_centroids`), starting from the current ones; the next round's clients
   receive them with the model.

Server fit (the released code's ``global_clustering``; the paper: 500 SGD steps): per step, the
Sinkhorn-Knopp equal-size assignment Q of the local centroids over the global ones (temperature 1/25) is
the target of the softmax assignment P = softmax(<c_l, g_k> / T), T = 0.1; the loss is the mean
negative cosine similarity between the rows of Q and P; SGD with ``server_lr`` 0.01, momentum 0.9,
weight decay 1e-4; the global centroids are renormalised to unit rows after every step.

Orchestra's defaults [0] (its released code): 128 global / 16 local centroids, memory 128, the server fit of 500
SGD steps at lr 0.01, momentum 0.9, weight decay 1e-4, Sinkhorn-Knopp [1] at temperature 1/25; all are this
code's defaults (the model's sizes: ``dssl.methods.orchestra``).

References:
    [0] Orchestra, 2022, https://arxiv.org/abs/2205.11506
    [1] SwAV, 2020, https://arxiv.org/abs/2006.09882
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.strategies.orchestra import OrchestraConfig
from dssl.federation.local import load_client_batch
from dssl.federation.state import StateDict
from dssl.federation.strategies.base import ClientContext, Strategy, Upload
from dssl.methods.sinkhorn import sinkhorn_knopp

CENTROIDS = "centroids"          # the method's global-centroid buffer (a shared key)
LOCAL_CENTROIDS = "local_centroids"  # Upload.extras key
MEMORY_READY = "memory_ready"    # ClientContext.scratch flag: the memory was filled this round


def fit_global_centroids(global_centroids: torch.Tensor, local_centroids: torch.Tensor, *, steps: int = 500,
                         lr: float = 0.01, momentum: float = 0.9, weight_decay: float = 1e-4,
                         temperature: float = 0.1, sinkhorn_temperature: float = 0.04) -> torch.Tensor:
    """The global centroids [K, D] after ``steps`` SGD steps fitting them to ``local_centroids`` [N, D]."""
    if global_centroids.ndim != 2 or local_centroids.ndim != 2 or global_centroids.shape[1] != local_centroids.shape[1]:
        raise ValueError(f"centroids must be [K, D] and [N, D], got {tuple(global_centroids.shape)} "
                         f"and {tuple(local_centroids.shape)}")
    points = F.normalize(local_centroids.detach().float(), dim=1)
    centroids = global_centroids.detach().float().clone().requires_grad_(True)
    optimizer = torch.optim.SGD([centroids], lr=lr, momentum=momentum, weight_decay=weight_decay)
    with torch.enable_grad():
        for _ in range(steps):
            target = sinkhorn_knopp(points @ centroids.detach().T, sinkhorn_temperature)
            predicted = torch.softmax(points @ centroids.T / temperature, dim=1)
            loss = -F.cosine_similarity(target, predicted, dim=1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                centroids.copy_(F.normalize(centroids, dim=1))
    return centroids.detach().to(global_centroids.dtype)


class OrchestraStrategy(Strategy):
    """Orchestra's [0] round: FedAvg, local equal-size clustering, server fit of the global centroids (FL only,
    its spec)."""

    def __init__(self, config: OrchestraConfig) -> None:
        super().__init__(config)
        self.temperatures = (0.1, 0.04)

    def setup(self, method: nn.Module) -> None:
        if getattr(method, "name", None) != "orchestra":
            raise ValueError(f"strategy 'orchestra' trains the method 'orchestra' (its centroids and memory), "
                             f"got method {getattr(method, 'name', type(method).__name__)!r}")
        super().setup(method)
        if CENTROIDS not in self.shared_keys:
            raise ValueError("strategy 'orchestra' needs the global centroids in the shared model; "
                             "turn keep_local off or keep the centroids out of it")
        self.temperatures = (method.temperature, method.sinkhorn_temperature)

    # -- client side ------------------------------------------------------------------------------

    def trains(self, ctx: ClientContext) -> bool:
        """Round 0 only initialises the centroids (the released code's first round)."""
        return ctx.round > 0

    def client_loss(self, method: nn.Module, images: torch.Tensor,
                    ctx: ClientContext) -> Mapping[str, torch.Tensor]:
        self._fill_memory_once(method, ctx)
        return method.training_loss(images, generator=ctx.generator)

    def client_upload(self, client_id: int, method: nn.Module, local_state: dict,
                      ctx: ClientContext) -> Upload:
        if ctx.data.num_samples == 0:  # nothing to cluster: the client sends its weights only
            return super().client_upload(client_id, method, local_state, ctx)
        self._fill_memory_once(method, ctx)
        centroids = method.local_centroids(ctx.generator)
        upload = super().client_upload(client_id, method, local_state, ctx)
        upload.extras[LOCAL_CENTROIDS] = centroids
        return upload

    def _fill_memory_once(self, method: nn.Module, ctx: ClientContext) -> None:
        """At a client's first participation, before its first step: the memory from its own data."""
        if ctx.participation > 0 or ctx.scratch.get(MEMORY_READY):
            return
        ctx.scratch[MEMORY_READY] = True
        size, data = method.memory.shape[0], ctx.data
        order = torch.randperm(data.num_samples, generator=ctx.generator, device=ctx.generator.device).cpu().numpy()
        picks = data.indices[np.resize(order, size)]  # repeats samples when the client has fewer than size
        method.fill_memory(load_client_batch(data, picks, ctx.generator, ctx.device), ctx.generator)

    # -- server side ------------------------------------------------------------------------------

    def aggregate(self, uploads: Sequence[Upload], weights: np.ndarray, global_state: StateDict) -> StateDict:
        """FedAvg; the centroids, which no client changes, are carried over exactly."""
        merged = super().aggregate(uploads, weights, global_state)
        return {**merged, CENTROIDS: global_state[CENTROIDS]}

    def server_step(self, global_states: list[StateDict], uploads: Sequence[Upload],
                    round_index: int) -> list[StateDict]:
        sent = [u.extras[LOCAL_CENTROIDS] for u in uploads if LOCAL_CENTROIDS in u.extras]
        if not sent:
            return global_states
        state = global_states[0]
        temperature, sinkhorn_temperature = self.temperatures
        fitted = fit_global_centroids(
            state[CENTROIDS], torch.cat([c.to(state[CENTROIDS].device) for c in sent]),
            steps=self.config.server_steps, lr=self.config.server_lr,
            momentum=self.config.server_momentum, weight_decay=self.config.server_weight_decay,
            temperature=temperature, sinkhorn_temperature=sinkhorn_temperature)
        return [{**state, CENTROIDS: fitted}, *global_states[1:]]

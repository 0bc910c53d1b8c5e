"""FeatARC's cluster selection: each client joins the cluster model whose features agree with its own.

Wang et al., "Does Learning from Decentralized Non-IID Unlabeled Data Benefit from Self Supervision?"
(ICLR 2023; the Dec-SSL algorithm, paper A's "FeatARC" baseline). The server keeps M cluster models
(M = 2). Before a round, a client embeds its images with its local model (the one it trained last
time; before its first round the cluster model i mod M) and with every cluster model; the agreement
with cluster j is the mean over its images of the inner product of the two l2-normalised encoder
features, and the client trains from, and uploads to, the cluster of highest agreement (the first on
a tie). Averaging is per cluster (the FL simulator aggregates each global model over its uploads).
The released code scores the client's training split (its first 80 %; 10 % validation and 10 % test
are held out there); here a client's whole data, which is what it trains on.

This module is the selection step (``select_global``) and the M independently initialised cluster
models; FeatARC's local loss (SimCLR plus the alignment of the client's projections to the chosen
cluster model's frozen features) is a ``client_loss`` still to be added before the strategy is
registered under the name ``featarc``.
"""

from __future__ import annotations

import copy
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dssl.federation.local import ClientData
from dssl.federation.state import StateDict, load_state_, snapshot
from dssl.federation.strategies.base import ClientContext, Strategy, Upload

LOCAL_FEATURE_MODEL = "featarc_model"  # local_state key: the client's last trained model (all tensors)
FEATURE_BATCH = 256


def alignment_scores(local: torch.Tensor, clusters: Sequence[torch.Tensor]) -> list[float]:
    """Mean over samples of <f_local, f_cluster> with both features l2-normalised, per cluster."""
    own = F.normalize(local.double(), dim=1)
    return [float((own * F.normalize(c.double(), dim=1)).sum(dim=1).mean()) for c in clusters]


def select_cluster(local: torch.Tensor, clusters: Sequence[torch.Tensor]) -> int:
    """Index of the cluster whose features agree best with the client's (first on a tie)."""
    return int(np.argmax(alignment_scores(local, clusters)))


@torch.no_grad()
def encoder_features(method: nn.Module, state: Mapping[str, torch.Tensor], data: ClientData,
                     device: torch.device, seed: int) -> torch.Tensor:
    """The encoder's features [N, D] of a client's images (with its feature-skew augmentation, drawn
    from a generator seeded by ``seed``) under ``state``, in evaluation mode."""
    load_state_(method, state)
    was_training = method.training
    method.eval()
    generator = torch.Generator(device=device).manual_seed(seed)
    features = []
    for start in range(0, data.num_samples, FEATURE_BATCH):
        batch = data.images.get_batch(data.indices[start:start + FEATURE_BATCH])
        images = batch.to(device).float().div_(255.0)  # uint8 -> [0, 1], as in local training
        if data.augment is not None:
            images = data.augment(images, generator)
        features.append(method.encoder(images).float())
    method.train(was_training)
    return torch.cat(features)


class FeatARCSelection(Strategy):
    """M cluster models; each client picks its cluster by feature agreement (``select_global``)."""

    def __init__(self, aggregation: str = "uniform", num_clusters: int = 2, init_seed: int = 0) -> None:
        super().__init__(aggregation)
        if num_clusters < 1:
            raise ValueError(f"num_clusters must be >= 1, got {num_clusters}")
        self.hparams.update(num_clusters=int(num_clusters), init_seed=int(init_seed))
        self.method: nn.Module | None = None
        self.last_scores: dict[int, list[float]] = {}

    def setup(self, method: nn.Module) -> None:
        super().setup(method)
        self.method = method

    def initial_global_states(self, initial: StateDict) -> list[StateDict]:
        """Cluster 0 is the initial model; cluster j > 0 is the same architecture re-initialised
        with seed ``init_seed + j`` (the released code builds M independent models)."""
        states = [initial]
        for j in range(1, self.hparams["num_clusters"]):
            model = copy.deepcopy(self.method)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.hparams["init_seed"] + j)
                for module in model.modules():
                    if hasattr(module, "reset_parameters"):
                        module.reset_parameters()
            states.append(snapshot(model, list(initial)))
        return states

    def select_global(self, client_id: int, global_states: Sequence[StateDict], local_state: dict,
                      ctx: ClientContext) -> int:
        own = local_state.get(LOCAL_FEATURE_MODEL)
        if own is None:  # before its first round a client's model is the cluster model i mod M
            own = self.client_update_start(client_id, global_states[client_id % len(global_states)],
                                           local_state, ctx)
        seed = ctx.client_id
        local = encoder_features(self.method, {**own}, ctx.data, ctx.device, seed)
        clusters = [encoder_features(self.method, self.client_update_start(client_id, g, local_state, ctx),
                                     ctx.data, ctx.device, seed) for g in global_states]
        self.last_scores[client_id] = alignment_scores(local, clusters)
        return int(np.argmax(self.last_scores[client_id]))

    def client_upload(self, client_id: int, method: nn.Module, local_state: dict, ctx: ClientContext) -> Upload:
        local_state[LOCAL_FEATURE_MODEL] = snapshot(method)
        return super().client_upload(client_id, method, local_state, ctx)

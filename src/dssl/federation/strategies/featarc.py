"""FeatARC: Dec-SSL's feature alignment and clustering (paper A's Table 2 baseline).

Wang et al., "Does Learning from Decentralized Non-IID Unlabeled Data Benefit from Self Supervision?"
(ICLR 2023) [0] (the Dec-SSL algorithm, paper A's [2] "FeatARC" baseline), FL only:

- Clusters. The server keeps M cluster models (M = 2, ``num_clusters``), independently initialised,
  each as the model is built (``initial_global_states``).
- Selection (``select_global``). Before a round, a client embeds its images with its local model (the
  one it trained last time; before its first round the cluster model i mod M) and with every cluster
  model; the agreement with cluster j is the mean over its images of the inner product of the two
  l2-normalised encoder features, and the client trains from, and uploads to, the cluster of highest
  agreement (the first on a tie). The released code scores the client's training split (its first
  80 %; 10 % validation and 10 % test are held out there); here a client's whole data, which is what
  it trains on.
- Local loss (``client_loss``). SimCLR's [1] NT-Xent on two views (temperature 0.5 in the paper: the
  model's ``temperature``) plus ``align_weight`` times the alignment term

      A = -1/2 * mean_b ( <c_b, z1_b / ||z1_b||> + <c_b, z2_b / ||z2_b||> ),

  where z1, z2 are the client's projections of the two views of image b and c_b the l2-normalised
  encoder feature of image b under the chosen cluster model as it was at the start of the round,
  frozen (evaluation mode, no gradient). The target is computed on the batch the client trains on
  before SimCLR's views are drawn (the client's images with its feature-skew augmentation, if any);
  the released code reads it from a feature bank of the un-augmented training images computed before
  the round, which holds the same quantity. Projections and encoder features must have the same
  width: the released code's SimCLR projector is 512-512-512 on ResNet-18 (here: the model's
  ``proj_output_dim`` = the backbone's feature width). ``align_weight`` defaults to 1, the released
  code's ``reg_scale``.
- Aggregation. FedAvg per cluster over the uploads of the clients that joined it (the FL simulator
  aggregates each global model over its uploads); a cluster nobody joined keeps its model.
- Result (``final_global_index``). The paper reports the best cluster model, chosen by its test
  accuracy after linear evaluation; that selects on test labels. Departure: the run's result here is
  the cluster most clients joined in the last round (ties: the lowest index), a rule that needs no
  labels; ``FLSimulator`` returns it and records its index (``RunResult.final_index``).

Dec-SSL's defaults [0] (its released code): M = 2, SimCLR at temperature 0.5 with a 512-512-512 projector on
ResNet-18, ``reg_scale`` 1. M and the weight are this strategy's defaults; the temperature and the projector
are the ``simclr`` model's options, whose own defaults (0.07, d-d-d/4) differ and are set in its model entry.

References:
    [0] Dec-SSL / FeatARC, 2022, https://arxiv.org/abs/2210.10947
    [1] SimCLR, 2020, https://arxiv.org/abs/2002.05709
    [2] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Table 2, where it is a baseline)
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.strategies.featarc import FeatARCConfig
from dssl.federation.local import ClientData
from dssl.federation.reproducibility import derive_seed
from dssl.federation.state import StateDict, load_state_, snapshot, state_digest
from dssl.federation.strategies.base import ClientContext, Strategy, Upload
from dssl.methods.base import rebuild_method

LOCAL_FEATURE_MODEL = "featarc_model"  # local_state key: the client's last trained model (all tensors)
CLUSTER_SCORES = "cluster_scores"  # ClientContext.scratch key: the client's agreement with each cluster
FEATURE_BATCH = 256
ENCODER_PREFIX = "encoder."


def alignment_scores(local: torch.Tensor, clusters: Sequence[torch.Tensor]) -> list[float]:
    """Mean over samples of <f_local, f_cluster> with both features l2-normalised, per cluster."""
    own = F.normalize(local.double(), dim=1)
    return [float((own * F.normalize(c.double(), dim=1)).sum(dim=1).mean()) for c in clusters]


def select_cluster(local: torch.Tensor, clusters: Sequence[torch.Tensor]) -> int:
    """Index of the cluster whose features agree best with the client's (first on a tie)."""
    return int(np.argmax(alignment_scores(local, clusters)))


def feature_alignment_loss(z1: torch.Tensor, z2: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """-1/2 (mean_b <t_b, z1_b/||z1_b||> + mean_b <t_b, z2_b/||z2_b||>) with t = l2-normalised ``target``,
    which is detached: the gradient reaches the projections only. Computed in float32 (also under
    bf16 autocast)."""
    t = F.normalize(target.detach().float(), dim=1)
    return -0.5 * ((t * F.normalize(z1.float(), dim=1)).sum(dim=1).mean()
                   + (t * F.normalize(z2.float(), dim=1)).sum(dim=1).mean())


def most_joined(choices: Mapping[int, int], num_clusters: int) -> int:
    """The cluster most clients chose (ties: the lowest index; no choices: 0)."""
    counts = np.bincount(np.asarray(list(choices.values()), dtype=np.int64), minlength=num_clusters)
    return int(np.argmax(counts))


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


class FeatARC(Strategy):
    """Dec-SSL [0] ("FeatARC"): M cluster models; each client joins the cluster of best feature agreement and
    trains SimCLR [1] plus the alignment of its projections to that cluster's frozen features.

    Options (``FeatARCConfig``): ``num_clusters`` (M, 2), ``align_weight`` (1.0), ``init_seed`` (enters the
    seeds that initialise clusters j > 0), ``aggregation`` (within a cluster; ``uniform``). FL only (its spec).
    """

    def __init__(self, config: FeatARCConfig) -> None:
        super().__init__(config)
        self.method: nn.Module | None = None
        self.frozen: nn.Module | None = None
        self.choices: dict[int, int] = {}  # client -> cluster, in round ``choice_round``
        self.choice_round = -1

    def setup(self, method: nn.Module) -> None:
        if getattr(method, "name", None) != "simclr" or not hasattr(method, "project_views"):
            raise ValueError(f"strategy 'featarc' trains SimCLR (method 'simclr'), got method "
                             f"{getattr(method, 'name', type(method).__name__)!r}")
        widths = (method.hparams["proj_output_dim"], method.encoder.feature_dim)
        if widths[0] != widths[1]:
            raise ValueError(f"featarc aligns the projections (width {widths[0]}) to the cluster model's encoder "
                             f"features (width {widths[1]}): set the model's hparams proj_output_dim: {widths[1]}")
        super().setup(method)
        self.method = method
        self.frozen = copy.deepcopy(method.encoder).requires_grad_(False).eval()

    def initial_global_states(self, initial: StateDict) -> list[StateDict]:
        """Cluster 0 is the initial model; cluster j > 0 is the same model built again, with the same
        initialisation (torchvision's Kaiming init of ResNet's convolutions, timm's of a ViT, ...), from
        a seed derived from ``init_seed``, j and the initial model's bytes -- so each run seed draws other
        clusters -- as the released code builds its M models with one constructor."""
        states = [initial]
        run = int(state_digest(initial)[:15], 16)
        for j in range(1, self.config.num_clusters):
            model = rebuild_method(self.method, derive_seed(self.config.init_seed, j, run))
            states.append(snapshot(model, list(initial)))
        return states

    # -- client side --------------------------------------------------------------------------------

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
        ctx.scratch[CLUSTER_SCORES] = alignment_scores(local, clusters)
        index = int(np.argmax(ctx.scratch[CLUSTER_SCORES]))
        self._freeze(global_states[index])
        return index

    def _freeze(self, cluster_state: Mapping[str, torch.Tensor]) -> None:
        """Load the chosen cluster model's encoder into the frozen copy that gives the alignment target."""
        load_state_(self.frozen, {k[len(ENCODER_PREFIX):]: v for k, v in cluster_state.items()
                                  if k.startswith(ENCODER_PREFIX)})

    def client_loss(self, method: nn.Module, images: torch.Tensor,
                    ctx: ClientContext) -> Mapping[str, torch.Tensor]:
        with torch.no_grad():
            target = self.frozen(images).float()
        _, z1, z2 = method.project_views(images, ctx.generator)
        contrastive = method.criterion(z1, z2)
        term = feature_alignment_loss(z1, z2, target)
        return {"loss": contrastive + self.config.align_weight * term,
                "method_loss": contrastive.detach(), "alignment": term.detach()}

    def client_upload(self, client_id: int, method: nn.Module, local_state: dict, ctx: ClientContext) -> Upload:
        local_state[LOCAL_FEATURE_MODEL] = snapshot(method)
        return super().client_upload(client_id, method, local_state, ctx)

    # -- server side, result and checkpointing ------------------------------------------------------

    def receive_uploads(self, uploads: Sequence[Upload], round_index: int) -> None:
        """The round's cluster choices: the global model each client uploaded to."""
        self.choices = {u.client_id: u.model_index for u in uploads}
        self.choice_round = round_index

    def final_global_index(self, global_states: Sequence[StateDict]) -> int:
        """The cluster most clients joined in the last round (ties: the lowest index)."""
        return most_joined(self.choices, len(global_states))

    def state_dict(self) -> dict[str, Any]:
        return {"choices": dict(self.choices), "choice_round": self.choice_round}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.choices, self.choice_round = dict(state["choices"]), int(state["choice_round"])

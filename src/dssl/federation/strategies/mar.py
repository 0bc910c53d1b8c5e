"""FedMAR and DecMAR: paper A's [0] MAR loss (Section 5, Eq. 5-7; Algorithms 1 and 2).

Each client minimises its method's loss (MAE's reconstruction) plus gamma_t^(i) * A(z_i, z_bar),
where z_i = f_e(x_1) is the batch of local masked representations (``representation`` of the
method: MAE's mean-pooled visible tokens, one embedding per image) and z_bar the global batch the
client received. After local training the client sends its weights and one batch z_i; z_bar is
aggregated and exchanged like the weights:

- ``fedmar`` (FL, Alg. 1): the server averages the round's z_i (line 17) with the weights'
  aggregation weights and broadcasts z_bar with the model;
- ``decmar`` (DecL, Alg. 2): each client's z_bar is the neighbour mean sum_j W_ij z_j (line 8) with
  the round's mixing matrix W (Alg. 2's 1/|A_i| with the ``uniform`` rule; a push-sum matrix is
  row-normalised for z, which carries no push-sum weight).

The first round has no z_bar yet and trains the plain method loss (Alg. 1 line 11, Alg. 2 line 12).
gamma follows Eq. 7 over the client's previous participations omega with horizon Omega (``horizon``;
None = the expected participations of a client over the run, rounds * K / N in FL, the rounds in
DecL, as the paper suggests). Defaults: gamma_max 0.1, gamma_min 1e-3 (appendix A.4.2, the best).

Options recording which variant ran (they enter the run's hparams and checkpoint fingerprint):
``alignment`` (``dssl.config.alignments.ALIGNMENT_SPECS``; ``a_mmd`` = Eq. 6, the default;
``a_mmd_code`` = the released code's token layout and scaling, MAE on a ViT only), ``sigma`` (the
fixed bandwidth of ``mmd``), ``z_summary``: which batch a client sends -- ``last_batch`` (the default:
the representations of its last local batch, a sample of its local distribution, as Eq. 6 treats
z_i) or ``epoch_mean`` (the released code: the mean over local batches of the batch tensors, which
pulls every row towards the client's mean embedding; here over all local steps, the code over the
last epoch).

Paper A's [0] defaults: gamma_max 0.1, gamma_min 1e-3 with the cosine decay of Eq. 7, MAE at mask ratio 0.75 on
its Tiny-ViT, A-MMD with the mean-distance bandwidth; all are this code's defaults. A-MMD is the unbiased MMD^2
of Gretton et al. [1] with a data-driven bandwidth (``dssl.federation.alignment``); DecMAR's round is D-PSGD
[2] on the MAR loss.

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
        (Chen, Yang, Wang & Yuan, "Understanding the Robustness of Distributed Self-Supervised Learning
        Frameworks Against Non-IID Data", ICLR 2026)
    [1] Gretton, Borgwardt, Rasch, Schoelkopf & Smola, "A Kernel Two-Sample Test", JMLR 13 (2012)
    [2] Lian et al., "Can Decentralized Algorithms Outperform Centralized Algorithms? A Case Study for
        Decentralized Parallel Stochastic Gradient Descent", NeurIPS 2017
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import nn

from dssl.config.strategies._mar import MARConfig
from dssl.config.alignments import ALIGNMENT_SPECS
from dssl.federation.alignment import alignment_loss, cosine_gamma, uses_tokens
from dssl.federation.state import StackedStates, StateDict
from dssl.federation.strategies.base import ClientContext, Strategy, Upload


class MARStrategy(Strategy):
    """Paper A's [0] MAR loss and the z bookkeeping shared by FedMAR and DecMAR (not registered itself); its
    options are ``MARConfig``'s."""

    def __init__(self, config: MARConfig) -> None:
        super().__init__(config)
        if not config.gamma_min <= config.gamma_max:
            raise ValueError(f"need 0 <= gamma_min <= gamma_max, got gamma_min={config.gamma_min}, "
                             f"gamma_max={config.gamma_max}")
        if config.alignment not in ALIGNMENT_SPECS:
            raise ValueError(f"unknown alignment {config.alignment!r}; known: {', '.join(ALIGNMENT_SPECS.names())}")
        self.uses_tokens = uses_tokens(config.alignment)

    def setup(self, method: nn.Module) -> None:
        super().setup(method)
        if self.uses_tokens and getattr(method, "name", None) != "mae":
            raise ValueError(f"alignment {self.config.alignment!r} needs MAE's token tensor (method 'mae' "
                             f"on a ViT), got method {getattr(method, 'name', type(method).__name__)!r}; "
                             f"use alignment 'a_mmd'")

    # -- what a client aligns to -------------------------------------------------------------------

    def reference(self, client_id: int) -> torch.Tensor | None:
        """The z_bar client ``client_id`` received this round (None: none yet)."""
        raise NotImplementedError

    def gamma(self, ctx: ClientContext) -> float:
        """Eq. 7 at the client's previous participations."""
        horizon = self.config.horizon or ctx.expected_participations
        return cosine_gamma(ctx.participation, horizon, self.config.gamma_max, self.config.gamma_min)

    # -- client side --------------------------------------------------------------------------------

    def client_loss(self, method: nn.Module, images: torch.Tensor,
                    ctx: ClientContext) -> Mapping[str, torch.Tensor]:
        out = dict(method.training_loss(images, with_representation=True, generator=ctx.generator))
        representation, tokens = out.pop("representation"), out.pop("tokens", None)
        z = tokens if self.uses_tokens else representation
        self._remember(ctx, z)
        z_bar = self.reference(ctx.client_id)
        if z_bar is None:
            return out
        gamma = self.gamma(ctx)
        term = alignment_loss(self.config.alignment, z, z_bar.to(z.device), self.config.sigma)
        return {**out, "method_loss": out["loss"], "loss": out["loss"] + gamma * term,
                "alignment": term.detach(), "gamma": term.new_full((), gamma)}   # a fill, not a host copy

    def _remember(self, ctx: ClientContext, z: torch.Tensor) -> None:
        """Keep what the client will send: its last full-size batch, or the running sum of batches."""
        z = z.detach().float()
        scratch = ctx.scratch
        if "z_shape" in scratch and z.shape != scratch["z_shape"]:
            return  # a smaller final batch (drop_last off): keep batches of one size
        scratch["z_shape"] = z.shape
        if self.config.z_summary == "last_batch":
            scratch["z"] = z
        else:
            scratch["z"] = scratch["z"] + z if "z" in scratch else z.clone()
            scratch["z_count"] = scratch.get("z_count", 0) + 1

    def client_upload(self, client_id: int, method: nn.Module, local_state: dict,
                      ctx: ClientContext) -> Upload:
        upload = super().client_upload(client_id, method, local_state, ctx)
        if "z" in ctx.scratch:  # a client too small for one batch trained nothing and sends no z
            z = ctx.scratch["z"]
            upload.extras["z"] = z / ctx.scratch["z_count"] if "z_count" in ctx.scratch else z
        return upload


def _common_rows(zs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Batches cut to the smallest batch size among them, so that they can be averaged row by row."""
    rows = min(z.shape[0] for z in zs)
    return [z[:rows] for z in zs]


class FedMAR(MARStrategy):
    """Paper A's [0] Algorithm 1: FedAvg on the MAR loss; the server averages z like the weights (FL only)."""

    def __init__(self, config: MARConfig) -> None:
        super().__init__(config)
        self.global_z: torch.Tensor | None = None

    def reference(self, client_id: int) -> torch.Tensor | None:
        return self.global_z

    def server_step(self, global_states: list[StateDict], uploads: Sequence[Upload],
                    round_index: int) -> list[StateDict]:
        sent = [u for u in uploads if "z" in u.extras]
        if sent:
            weights = self.aggregation_weights([u.num_samples for u in sent])
            zs = torch.stack(_common_rows([u.extras["z"] for u in sent]))
            self.global_z = torch.tensordot(torch.as_tensor(weights, dtype=zs.dtype, device=zs.device), zs, dims=1)
        return global_states

    def state_dict(self) -> dict[str, Any]:
        return {"global_z": self.global_z}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.global_z = state["global_z"]


class DecMAR(MARStrategy):
    """Paper A's [0] Algorithm 2: D-PSGD [2] on the MAR loss; z_bar is the neighbour mean of the z sent (DecL
    only)."""

    def __init__(self, config: MARConfig) -> None:
        super().__init__(config)
        self.sent_z: dict[int, torch.Tensor] = {}       # each client's latest z
        self.neighbour_z: dict[int, torch.Tensor] = {}  # each client's z_bar for its next training

    def reference(self, client_id: int) -> torch.Tensor | None:
        return self.neighbour_z.get(client_id)

    def receive_uploads(self, uploads: Sequence[Upload], round_index: int) -> None:
        """Keep each client's z for the gossip, which may come at the start of the next round."""
        self.sent_z.update({u.client_id: u.extras["z"] for u in uploads if "z" in u.extras})

    def gossip(self, states: StackedStates, mixing: torch.Tensor, uploads: Sequence[Upload],
               round_index: int) -> None:
        super().gossip(states, mixing, uploads, round_index)
        if not self.sent_z:
            return  # Alg. 2, t = 0: only weights are exchanged
        senders = sorted(self.sent_z)
        zs = torch.stack(_common_rows([self.sent_z[j] for j in senders]))
        weights = mixing.to(zs.device, torch.float64)[:, senders]
        totals = weights.sum(dim=1, keepdim=True)
        mixed = torch.tensordot((weights / totals.clamp_min(1e-300)).to(zs.dtype), zs, dims=1)
        self.neighbour_z = {i: mixed[i] for i in range(len(mixed)) if float(totals[i]) > 0}

    def state_dict(self) -> dict[str, Any]:
        return {"sent_z": dict(self.sent_z), "neighbour_z": dict(self.neighbour_z)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.sent_z, self.neighbour_z = dict(state["sent_z"]), dict(state["neighbour_z"])


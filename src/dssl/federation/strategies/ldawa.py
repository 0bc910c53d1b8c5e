"""L-DAWA: layer-wise divergence-aware weight aggregation (paper A's baseline).

Rehman et al., "L-DAWA: Layer-wise Divergence Aware Weight Aggregation in Federated Self-Supervised
Visual Representation Learning" (ICCV 2023) [0]. The server scales each client's layer l by its angular
divergence to the previous global model, the cosine similarity

    delta_k^l = <w_k^l, w_g^l> / (||w_k^l|| ||w_g^l||),   capped at 1,

and averages the scaled layers: w_g^l <- sum_k a_k delta_k^l w_k^l with a_k the aggregation weights
(``aggregation: uniform`` gives the paper's 1/K). A "layer" is every floating-point state tensor with
at least one dimension (weights, biases and, as in the released code, BN statistics); scalar and
integer tensors (BN's counter) are averaged plainly. A client layer with zero norm is not scaled.
``granularity``: ``layer`` (default) or ``model`` -- one cosine over all of those tensors flattened,
the model-level variant paper A [2] likely ran. ``warmup_rounds``: rounds of plain FedAvg [1] first (0 by
default; the released code aggregates its first 3 rounds by FedAvg).

L-DAWA's defaults [0]: the per-layer cosine capped at 1 and the scaled layers averaged with 1/K (this code's
defaults), plain FedAvg for the first rounds (3 in the released code, where this code's default of 0 differs).

References:
    [0] L-DAWA, 2023, https://arxiv.org/abs/2307.07393
    [1] FedAvg, 2016, https://arxiv.org/abs/1602.05629
    [2] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Table 2, where it is a baseline)
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch

from dssl.config.strategies.ldawa import LDAWAConfig
from dssl.federation.state import StateDict, combine, normalised_weights, weighted_average
from dssl.federation.strategies.base import Strategy, Upload


def is_layer(tensor: torch.Tensor) -> bool:
    """Tensors L-DAWA scales: floating point with at least one dimension."""
    return tensor.is_floating_point() and tensor.ndim > 0


@torch.no_grad()
def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """cos(a, b) of the flattened tensors, capped at 1; 1 (no scaling) when either norm is zero."""
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    norms = a.norm() * b.norm()
    if norms == 0:
        return 1.0
    return min(float(a @ b / norms), 1.0)


def divergence_scales(client: Mapping[str, torch.Tensor], global_state: Mapping[str, torch.Tensor],
                      granularity: str) -> dict[str, float]:
    """delta per scaled key: per tensor (``layer``) or one for the whole model (``model``)."""
    keys = [k for k, v in client.items() if is_layer(v)]
    if granularity == "layer":
        return {k: cosine(client[k], global_state[k]) for k in keys}
    whole = cosine(torch.cat([client[k].reshape(-1).double() for k in keys]),
                   torch.cat([global_state[k].reshape(-1).double() for k in keys]))
    return dict.fromkeys(keys, whole)


class LDAWA(Strategy):
    """L-DAWA [0]: FedAvg whose average scales each client layer by its cosine with the previous global layer.
    FL only (its spec): the scaling is measured against the server's global model."""

    def __init__(self, config: LDAWAConfig) -> None:
        super().__init__(config)
        self.rounds_aggregated = 0
        self.last_scales: list[dict[str, float]] = []

    def aggregate(self, uploads: Sequence[Upload], weights: np.ndarray, global_state: StateDict) -> StateDict:
        states = [u.state for u in uploads]
        if self.rounds_aggregated < self.config.warmup_rounds:
            return weighted_average(states, weights)
        w = normalised_weights(weights)
        self.last_scales = [divergence_scales(s, global_state, self.config.granularity) for s in states]
        merged: StateDict = {}
        for key in states[0]:
            stacked = torch.stack([s[key] for s in states])
            if key in self.last_scales[0]:
                scales = torch.tensor([d[key] for d in self.last_scales], dtype=torch.float64)
                # sum_k a_k delta_k w_k: the scales multiply the weights, which are not renormalised.
                merged[key] = torch.tensordot((w * scales).to(stacked.device, stacked.dtype), stacked, dims=1)
            else:
                merged[key] = combine(stacked, w)
        return merged

    def server_step(self, global_states: list[StateDict], uploads: Sequence[Upload],
                    round_index: int) -> list[StateDict]:
        self.rounds_aggregated = round_index + 1
        return global_states

    def gossip(self, states, mixing, uploads, round_index) -> None:
        raise ValueError("ldawa is a federated (FL) strategy: it scales uploads against a server's global model")

    def state_dict(self) -> dict:
        return {"rounds_aggregated": self.rounds_aggregated}

    def load_state_dict(self, state: Mapping) -> None:
        unknown = set(state) - {"rounds_aggregated"}
        if unknown:
            raise ValueError(f"strategy 'ldawa' state has unknown keys {sorted(unknown)}")
        self.rounds_aggregated = int(state.get("rounds_aggregated", 0))

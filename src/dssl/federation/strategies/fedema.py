"""FedEMA: divergence-aware dynamic moving-average update (paper B [0], ICLR 2022, Section 5).

Zhuang, Wen & Zhang, "Divergence-aware Federated Self-Supervised Learning". BYOL-style FedSSL where a
client that participated before blends its online encoder (projector included) and predictor with
the global ones instead of replacing them (Eq. 3):

    W_k^r = mu * W_k^(r-1) + (1 - mu) * W_g^r,    mu = min(lambda * ||W_g^r - W_k^(r-1)||, 1)

The EMA target stays on the client (updated only by BYOL's own EMA); mu = 0 recovers FedBYOL.
``scaler``: ``auto`` (default, paper B's autoscaler) sets lambda_k = tau / ||W_g^(r+1) - W_k^r|| once,
at the end of client k's first participation (so that mu = tau at its next one; ``tau`` 0.7 in the
paper, 0.8 the released code's default), stored per client in the strategy's checkpointed state;
``constant`` uses ``ema_lambda`` (0.8 in the paper) for every client.
``divergence`` (``dssl.federation.strategies.divergence``): ``paper`` (default) = ||W_g - W_k|| in the
norm paper B's constants were tuned on (the code's mean of per-kernel L2 norms over the encoder's
convolutions); ``paper_flat`` = the same difference as one flattened norm of the online network;
``code`` = the released code's drift of the client's encoder during its previous local training (its
autoscaler then divides ``tau`` by the first such drift).
``skipped``: what a client that did not train in the previous round starts from. Paper B trains every
client in every round (cross-silo) and is silent; its code, under random client selection
(``selective_ema``, as FedU2's FedEMA), restarts such a client from the global model -- online,
predictor and target networks alike -- and blends only after consecutive rounds: ``restart``
(default; in a cross-silo cell it never applies). ``blend`` blends the model the client kept however
many rounds ago it trained, so with 5 of 100 clients per round (paper A's Table 2) the divergence to
it grows with the ~20-round gap and mu saturates at 1: the client keeps its stale model.
Only parameters are blended; BN statistics come from the global model, as in the released code.
The code's first-round quirk (target and online networks are one object) is not reproduced.
FL only: the divergence is to a server's global model.

Paper B's [0] setting: ``dssl.federation.strategies.fedssl`` (5 clients, BYOL on a CIFAR ResNet-18, heads
512-4096-2048 and 2048-4096-2048, target EMA 0.99). Its autoscaler with tau = 0.7 and its divergence are this
code's defaults; its data-size weighting of the average is not (``aggregation: uniform``). FedU [1] is the
predictor-only ancestor (``fedu``).

References:
    [0] FedEMA, 2022, https://arxiv.org/abs/2204.04385
    [1] FedU, 2021, https://arxiv.org/abs/2108.06492
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import nn

from dssl.config.strategies.fedema import FedEMAConfig
from dssl.federation.state import StateDict
from dssl.federation.strategies.base import LOCAL_MODEL, ClientContext, Upload
from dssl.federation.strategies.divergence import DRIFT, LAST_ROUND, DivergenceAware


def ema_mu(scale: float, divergence: float) -> float:
    """mu = min(lambda * divergence, 1) (paper B, Eq. 3)."""
    return min(scale * divergence, 1.0)


class FedEMA(DivergenceAware):
    """FedEMA [0]: blend the client's online encoder and predictor with the global ones by a divergence-aware
    mu. FL only (its spec): the divergence and the scaling are measured against the server's global model."""

    def __init__(self, config: FedEMAConfig) -> None:
        super().__init__(config)
        self.lambdas: dict[str, float] = {}  # client id (str) -> autoscaled lambda_k
        self.blended_keys: tuple[str, ...] = ()

    def setup(self, method: nn.Module) -> None:
        super().setup(method)
        self.kept_keys = tuple(method.state_dict())  # the whole model: W_k^(r-1) is blended
        self.blended_keys = self.online_keys + self.predictor_keys
        self.measure_on(method, self.online_keys)

    # -- client side ------------------------------------------------------------------------------

    def client_update_start(self, client_id: int, global_state: Mapping[str, torch.Tensor],
                            local_state: dict, ctx: ClientContext) -> Mapping[str, torch.Tensor]:
        kept = local_state.get(LOCAL_MODEL)
        if kept is None:  # first participation: the global model (FedSSL.first_start)
            start = self.first_start(global_state)
        elif self.restarts(local_state, ctx):
            start = self.first_start(global_state)
            local_state["fedema"] = {"divergence": None, "mu": 0.0, "restarted": True}
        else:
            start = dict(super().client_update_start(client_id, global_state, local_state, ctx))
            divergence = self.divergence(global_state, kept, local_state)
            mu = ema_mu(self.scale(client_id), divergence)
            self.blend_into(start, kept, global_state, self.blended_keys, mu)
            local_state["fedema"] = {"divergence": divergence, "mu": mu, "restarted": False}
        self.remember_start(start, ctx)
        return start

    def restarts(self, local_state: dict, ctx: ClientContext) -> bool:
        """``skipped: restart`` and the client did not train in the previous round."""
        return self.config.skipped == "restart" and local_state.get(LAST_ROUND) != ctx.round - 1

    def scale(self, client_id: int) -> float:
        """lambda of this client: the constant, or its autoscaled value (0 until it is known)."""
        if self.config.scaler == "constant":
            return self.config.ema_lambda
        return self.lambdas.get(str(client_id), 0.0)

    # -- server side ------------------------------------------------------------------------------

    def server_step(self, global_states: list[StateDict], uploads: Sequence[Upload],
                    round_index: int) -> list[StateDict]:
        """Autoscaler: lambda_k = tau / d_k, set once, after client k's first participation with d_k > 0.

        d_k is ||W_g^(r+1) - W_k^r|| (``paper``, ``paper_flat``: the divergence at the client's next
        start, so mu = tau there) or ``code``'s drift during this local training (what the code divides
        tau by at the next start, which measures that same drift).
        """
        if self.config.scaler != "auto":
            return global_states
        for upload in uploads:
            key = str(upload.client_id)
            if key in self.lambdas:
                continue
            if self.uses_code_divergence:
                divergence = float(upload.extras[DRIFT])
            else:
                divergence = self.distance(global_states[upload.model_index], upload.state)
            if divergence > 0:
                self.lambdas[key] = self.config.tau / divergence
        return global_states

    # -- checkpointing ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {"lambdas": dict(self.lambdas)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        unknown = set(state) - {"lambdas"}
        if unknown:
            raise ValueError(f"strategy 'fedema' state has unknown keys {sorted(unknown)}")
        self.lambdas = {str(k): float(v) for k, v in state.get("lambdas", {}).items()}

"""FedU: divergence-aware predictor update (DAPU).

Zhuang et al., "Collaborative Unsupervised Visual Representation Learning from Decentralized Data"
(ICCV 2021) [0], as summarised in paper B (ICLR 2022) [1]. BYOL-style FedSSL in which the online encoder is
always replaced by the global one, and the predictor by the global predictor only when the divergence
between the global and the client's model is below ``threshold`` (0.4 in the released code);
otherwise the client keeps its own predictor.

``divergence`` (``dssl.federation.strategies.divergence``): ``paper`` (default) = ||W_g - W_k||, this
round's global model against the client's model after its previous participation, in the norm the
threshold was tuned on (the code's mean of per-kernel L2 norms over the encoder's convolutions);
``paper_flat`` = the same difference as one flattened norm of the online network (encoder + projector);
``code`` = the released code's drift of the client's encoder during its previous local training.
``divergence_of``: ``encoder`` (default, as both the paper and the code measure it) or ``predictor``
(the flattened norm over the predictor's parameters; ``paper_flat`` only).
The decision of each participation is kept in the client's state (``local_state["fedu"]``).
FL only: the divergence is to a server's global model.

This code runs FedU in paper B's [1] setting (``dssl.federation.strategies.fedssl``: 5 clients, BYOL on a CIFAR
ResNet-18, heads 512-4096-2048 and 2048-4096-2048, target EMA 0.99); ``threshold`` 0.4 is the released code's
value and this code's default. Paper B weights the average by client data size; this code's default
``aggregation: uniform`` differs.

References:
    [0] FedU, 2021, https://arxiv.org/abs/2108.06492
    [1] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import nn

from dssl.config.strategies.fedssl import FedSSLConfig
from dssl.config.strategies.fedu import FedUConfig
from dssl.federation.strategies.base import LOCAL_MODEL, ClientContext
from dssl.federation.strategies.divergence import DivergenceAware


class FedU(DivergenceAware):
    """FedU [0]: online encoder from the global model; predictor from it only if the divergence < threshold.
    FL only (its spec): the divergence is measured against the server's global model."""

    def __init__(self, config: FedUConfig) -> None:
        super().__init__(config, FedSSLConfig(update_predictor="local"))
        if config.divergence != "paper_flat" and config.divergence_of != "encoder":
            raise ValueError(f"divergence {config.divergence!r} measures the encoder's convolutions; divergence_of: "
                             "predictor needs divergence: paper_flat")

    def setup(self, method: nn.Module) -> None:
        super().setup(method)
        self.kept_keys = tuple(method.state_dict())  # the whole model: W_k^(r-1) for the divergence
        if not self.predictor_keys:
            raise ValueError(f"fedu updates a predictor; method {method.name!r} has none (use byol or simsiam)")
        self.measure_on(method, self.online_keys if self.config.divergence_of == "encoder" else self.predictor_keys)

    def client_update_start(self, client_id: int, global_state: Mapping[str, torch.Tensor],
                            local_state: dict, ctx: ClientContext) -> Mapping[str, torch.Tensor]:
        start = dict(super().client_update_start(client_id, global_state, local_state, ctx))
        kept = local_state.get(LOCAL_MODEL)
        if kept is not None:  # a first participation takes the global predictor (FedSSL.first_start)
            divergence = self.divergence(global_state, kept, local_state)
            use_global = divergence < self.config.threshold
            if use_global:
                for key in self.predictor_keys:
                    start[key] = global_state[key]
            local_state["fedu"] = {"divergence": divergence, "global_predictor": use_global}
        self.remember_start(start, ctx)
        return start

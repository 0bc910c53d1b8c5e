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

from typing import Annotated, Mapping

import torch
from torch import nn

from dssl.config.ranges import Range
from dssl.federation.strategies.base import LOCAL_MODEL, ClientContext, register_strategy
from dssl.federation.strategies.divergence import DivergenceAware

DIVERGENCE_OF = ("encoder", "predictor")


@register_strategy("fedu")
class FedU(DivergenceAware):
    """FedU [0]: online encoder from the global model; predictor from it only if the divergence < threshold."""

    frameworks = ("fl",)   # its divergence or scaling is measured against the server's global model

    def __init__(self, aggregation: str = "uniform", threshold: Annotated[float, Range(0.0)] = 0.4,
                 divergence: str = "paper", divergence_of: str = "encoder") -> None:
        super().__init__(aggregation, divergence, update_predictor="local")
        if divergence_of not in DIVERGENCE_OF:
            raise ValueError(f"unknown divergence_of {divergence_of!r}; known: {', '.join(DIVERGENCE_OF)}")
        if divergence != "paper_flat" and divergence_of != "encoder":
            raise ValueError(f"divergence {divergence!r} measures the encoder's convolutions; divergence_of: "
                             "predictor needs divergence: paper_flat")
        if threshold < 0:
            raise ValueError(f"threshold must be >= 0, got {threshold}")
        self.hparams.update(threshold=float(threshold), divergence_of=divergence_of)

    def setup(self, method: nn.Module) -> None:
        super().setup(method)
        self.kept_keys = tuple(method.state_dict())  # the whole model: W_k^(r-1) for the divergence
        if not self.predictor_keys:
            raise ValueError(f"fedu updates a predictor; method {method.name!r} has none (use byol or simsiam)")
        self.measure_on(method, self.online_keys if self.hparams["divergence_of"] == "encoder" else self.predictor_keys)

    def client_update_start(self, client_id: int, global_state: Mapping[str, torch.Tensor],
                            local_state: dict, ctx: ClientContext) -> Mapping[str, torch.Tensor]:
        start = dict(super().client_update_start(client_id, global_state, local_state, ctx))
        kept = local_state.get(LOCAL_MODEL)
        if kept is not None:  # a first participation takes the global predictor (FedSSL.first_start)
            divergence = self.divergence(global_state, kept, local_state)
            use_global = divergence < self.hparams["threshold"]
            if use_global:
                for key in self.predictor_keys:
                    start[key] = global_state[key]
            local_state["fedu"] = {"divergence": divergence, "global_predictor": use_global}
        self.remember_start(start, ctx)
        return start

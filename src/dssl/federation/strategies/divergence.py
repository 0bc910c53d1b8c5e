"""Model divergences used by paper B's FedU and FedEMA, and their common base ``DivergenceAware``.

``paper``: one L2 norm of the flattened difference ||W_g - W_k|| over the online network's parameters
(paper B, Eq. 3: the global model against the client's model of its previous participation).
``code``: paper B's released code -- the mean over the encoder's convolution weights of per-tensor L2
norms, measured as the client's own drift during its previous local training (one round stale).
"""

from __future__ import annotations

from typing import Iterable, Mapping

import torch
from torch import nn

from dssl.federation.strategies.base import ClientContext, Upload
from dssl.federation.strategies.fedssl import FedSSL

DIVERGENCES = ("paper", "code")
DRIFT = "drift"  # local_state and Upload.extras key: the client's drift during its last local training


@torch.no_grad()
def l2_distance(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], keys: Iterable[str]) -> float:
    """||a - b|| over ``keys``, flattened into one vector (float64 accumulation)."""
    total = torch.zeros((), dtype=torch.float64)
    for key in keys:
        total += (a[key].double() - b[key].double()).pow(2).sum().cpu()
    return float(total.sqrt())


@torch.no_grad()
def mean_layer_distance(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], keys: Iterable[str]) -> float:
    """Mean over ``keys`` of the per-tensor L2 norms ||a_l - b_l|| (paper B's code)."""
    keys = list(keys)
    if not keys:
        raise ValueError("no tensors to measure a divergence on")
    return sum(float((a[k].double() - b[k].double()).norm()) for k in keys) / len(keys)


def conv_weight_keys(param_shapes: Mapping[str, torch.Size], keys: Iterable[str]) -> list[str]:
    """The convolution kernels (4-d parameters) among ``keys``: what paper B's code measures."""
    return [k for k in keys if k in param_shapes and len(param_shapes[k]) == 4]


def code_divergence_keys(method: nn.Module, keys: Iterable[str]) -> tuple[str, ...]:
    """The tensors the ``code`` divergence measures: the convolution kernels among ``keys``."""
    shapes = {name: p.shape for name, p in method.named_parameters()}
    measured = tuple(conv_weight_keys(shapes, keys))
    if not measured:
        raise ValueError("divergence 'code' needs convolution weights in the encoder; use divergence: paper")
    return measured


class DivergenceAware(FedSSL):
    """FedSSL whose client update depends on a divergence (FedU, FedEMA): ``measured_keys`` are the
    tensors it is measured on; with ``divergence: code`` the client's own drift during local training
    (start of training -> upload) is kept in ``local_state["drift"]`` for its next participation and
    sent in ``Upload.extras["drift"]``."""

    def __init__(self, aggregation: str = "uniform", divergence: str = "paper", **fedssl_options) -> None:
        super().__init__(aggregation, **fedssl_options)
        check_divergence(divergence)
        self.hparams["divergence"] = divergence
        self.measured_keys: tuple[str, ...] = ()

    @property
    def uses_code_divergence(self) -> bool:
        return self.hparams["divergence"] == "code"

    def remember_start(self, start: Mapping[str, torch.Tensor], ctx: ClientContext) -> None:
        """Keep the measured tensors the client starts training from (the ``code`` drift's origin)."""
        if self.uses_code_divergence:
            ctx.scratch["divergence_start"] = {k: start[k].detach().clone() for k in self.measured_keys}

    def client_upload(self, client_id: int, method: nn.Module, local_state: dict, ctx: ClientContext) -> Upload:
        upload = super().client_upload(client_id, method, local_state, ctx)
        if self.uses_code_divergence:
            drift = mean_layer_distance(ctx.scratch["divergence_start"], method.state_dict(), self.measured_keys)
            local_state[DRIFT] = upload.extras[DRIFT] = drift  # the server's autoscaler reads it too
        return upload


def check_divergence(name: str) -> None:
    if name not in DIVERGENCES:
        raise ValueError(f"unknown divergence {name!r}; known: {', '.join(DIVERGENCES)} "
                         "(paper: ||W_g - W_k|| as paper B defines it; code: its released code's drift)")

"""Model divergences used by paper B's FedU and FedEMA.

``paper``: one L2 norm of the flattened difference ||W_g - W_k|| over the online network's parameters
(paper B, Eq. 3: the global model against the client's model of its previous participation).
``code``: paper B's released code -- the mean over the encoder's convolution weights of per-tensor L2
norms, measured as the client's own drift during its previous local training (one round stale).
"""

from __future__ import annotations

from typing import Iterable, Mapping

import torch

DIVERGENCES = ("paper", "code")


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


def check_divergence(name: str) -> None:
    if name not in DIVERGENCES:
        raise ValueError(f"unknown divergence {name!r}; known: {', '.join(DIVERGENCES)} "
                         "(paper: ||W_g - W_k|| as paper B defines it; code: its released code's drift)")

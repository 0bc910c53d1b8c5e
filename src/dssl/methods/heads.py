"""MLP building blocks shared by the projection and prediction heads of the SSL methods.

Each method's module cites the paper its heads come from, with that paper's sizes. ``FedSSLMLPHead`` is paper
B's [0] one MLP, built after BYOL's [1] projector and predictor.

References:
    [0] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385 (Zhuang, Wen & Zhang, ICLR 2022)
    [1] BYOL, 2020, https://arxiv.org/abs/2006.07733
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn


def mlp_layers(
    dims: Sequence[int],
    hidden_bn: bool = True,
    output_bn: bool = False,
    bias_before_bn: bool = False,
) -> list[nn.Module]:
    """Layers of an MLP through ``dims`` (input, hidden..., output).

    Hidden layers are Linear(-BN)-ReLU; the output layer is a plain Linear, or, with ``output_bn``, a
    Linear followed by a non-affine BN as in SimSiam's projector. A Linear followed by BN has no bias
    (the BN shift makes it redundant) unless ``bias_before_bn``, which only matters for parameter
    counts that include it.
    """
    layers: list[nn.Module] = []
    last = len(dims) - 2
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        bn = output_bn if i == last else hidden_bn
        layers.append(nn.Linear(d_in, d_out, bias=bias_before_bn or not bn))
        if bn:
            layers.append(nn.BatchNorm1d(d_out, affine=i != last))
        if i != last:
            layers.append(nn.ReLU(inplace=True))
    return layers


class FedSSLMLPHead(nn.Sequential):
    """Paper B's code's one MLP (EasyFL ``model.MLP``), its every projector and predictor: Linear-BN-ReLU-Linear,
    the first Linear with its bias. Paper B's sizes on ResNet-18 [0]: 512-4096-2048 (projector) and 2048-4096-2048
    (predictor); its MoCo v2 head is the same MLP at 512-512-128. BYOL's own heads [1] are 2048-4096-256 and
    256-4096-256 on ResNet-50: paper B keeps the hidden width 4096 and widens the output to 2048."""

    def __init__(self, input_dim: int = 512, hidden_dim: int = 4096, output_dim: int = 2048) -> None:
        super().__init__(*mlp_layers([input_dim, hidden_dim, output_dim], bias_before_bn=True))

"""MLP building blocks shared by the projection and prediction heads of the SSL methods."""

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
    the first Linear with its bias. Paper B's sizes on ResNet-18: 512-4096-2048 (projector) and 2048-4096-2048
    (predictor); its MoCo v2 head is the same MLP at 512-512-128."""

    def __init__(self, input_dim: int = 512, hidden_dim: int = 4096, output_dim: int = 2048) -> None:
        super().__init__(*mlp_layers([input_dim, hidden_dim, output_dim], bias_before_bn=True))

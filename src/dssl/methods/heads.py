"""MLP building block shared by the projection and prediction heads of the Siamese methods."""

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

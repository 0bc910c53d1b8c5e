"""Convolutional backbones: torchvision's ResNet-18 (two stems) and a small CPU CNN.

Every CNN backbone exposes
- ``forward_features(x) -> [B, C, h, w]``: the last spatial feature map (MAE-CNN decodes it),
- ``forward(x) -> [B, feature_dim]``: that map averaged over space,
- ``feature_dim`` (= C) and ``feature_stride`` (= H / h when H is a multiple of the stride).

ResNet-18 [0] (He et al., CVPR 2016): basic blocks [2, 2, 2, 2] of widths 64-128-256-512 after a 7x7 stride-2
convolution and a 3x3 stride-2 max-pool, 512-d pooled features (11.69 M parameters with its 1000-way classifier,
torchvision's count). The CIFAR stem (3x3 stride 1, no max-pool) is the one paper B [1] and SimSiam's [2] CIFAR
experiments use, the ImageNet stem the one paper A's [3] code uses; ``cnn_small`` is this project's own
CPU-sized network (no paper).

References:
    [0] ResNet, 2015, https://arxiv.org/abs/1512.03385
    [1] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [2] SimSiam, 2020, https://arxiv.org/abs/2011.10566
    [3] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
import torchvision
from torch import nn


class ResNetBackbone(nn.Module):
    """ResNet-18 [0] (He et al., 2016) without its classifier; 512-d pooled features.

    ``stem="cifar"``: 3x3 stride-1 first convolution and no max-pool, as in the CIFAR ResNet-18 of
    paper B [1] (FedSSL / FedEMA) and of SimSiam's [2] CIFAR experiments; overall stride 8.
    ``stem="imagenet"``: torchvision's 7x7 stride-2 convolution and max-pool (ResNet's own [0]), which paper A's
    [3] code uses
    for Mini-ImageNet pretraining; overall stride 32.
    Weights are torchvision's random initialisation (no pretrained weights).
    """

    def __init__(self, in_chans: int = 3, stem: Literal["cifar", "imagenet"] = "cifar") -> None:
        super().__init__()
        net = torchvision.models.resnet18(weights=None)
        if stem == "cifar":
            self.conv1 = nn.Conv2d(in_chans, 64, kernel_size=3, stride=1, padding=1, bias=False)
            self.maxpool: nn.Module = nn.Identity()
            self.feature_stride = 8
        elif stem == "imagenet":
            self.conv1 = nn.Conv2d(in_chans, 64, kernel_size=7, stride=2, padding=3, bias=False)
            self.maxpool = net.maxpool
            self.feature_stride = 32
        else:
            raise ValueError(f"unknown ResNet stem {stem!r}; known: cifar, imagenet")
        # Same initialisation torchvision gives its own first convolution.
        nn.init.kaiming_normal_(self.conv1.weight, mode="fan_out", nonlinearity="relu")
        self.bn1, self.relu = net.bn1, net.relu
        self.layer1, self.layer2, self.layer3, self.layer4 = net.layer1, net.layer2, net.layer3, net.layer4
        self.feature_dim = 512

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_features(x).mean(dim=(2, 3))


class SmallCNN(nn.Module):
    """A few 3x3 conv-BN-ReLU layers for the CPU-sized embedded profile (16x16 images, 2 cores).

    The first layer keeps the resolution, each later one halves it: stride 2 ** (len(widths) - 1). The default
    widths and their sizing are declared with ``cnn_small``'s options (``dssl.config.backbones.cnn_small``).
    """

    def __init__(self, in_chans: int, widths: Sequence[int]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = in_chans
        for i, width in enumerate(widths):
            stride = 1 if i == 0 else 2
            layers += [
                nn.Conv2d(channels, width, kernel_size=3, stride=stride, padding=1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(inplace=True),
            ]
            channels = width
        self.features = nn.Sequential(*layers)
        self.feature_dim = channels
        self.feature_stride = 2 ** (len(widths) - 1)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_features(x).mean(dim=(2, 3))


# Builders by params.yaml name, each declared with its options and family in ``dssl.config.backbones.<name>``.


def resnet18_cifar(image_size: int, in_chans: int) -> ResNetBackbone:
    """ResNet-18 with the CIFAR stem (stride 8)."""
    del image_size  # fully convolutional: any size works
    return ResNetBackbone(in_chans, stem="cifar")


def resnet18_imagenet(image_size: int, in_chans: int) -> ResNetBackbone:
    """ResNet-18 with torchvision's ImageNet stem (stride 32)."""
    del image_size
    return ResNetBackbone(in_chans, stem="imagenet")


def cnn_small(image_size: int, in_chans: int, widths: Sequence[int]) -> SmallCNN:
    """The small CPU CNN with layers of ``widths`` channels."""
    del image_size
    return SmallCNN(in_chans, widths)

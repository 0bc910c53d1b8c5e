"""Convolutional backbones: torchvision's ResNet-18 (two stems) and a small CPU CNN.

Every CNN backbone exposes
- ``forward_features(x) -> [B, C, h, w]``: the last spatial feature map (MAE-CNN decodes it),
- ``forward(x) -> [B, feature_dim]``: that map averaged over space,
- ``feature_dim`` (= C) and ``feature_stride`` (= H / h when H is a multiple of the stride).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
import torchvision
from torch import nn


class ResNetBackbone(nn.Module):
    """ResNet-18 (He et al., 2016) without its classifier; 512-d pooled features.

    ``stem="cifar"``: 3x3 stride-1 first convolution and no max-pool, as in the CIFAR ResNet-18 of
    paper B (FedSSL / FedEMA) and of SimSiam's CIFAR experiments; overall stride 8.
    ``stem="imagenet"``: torchvision's 7x7 stride-2 convolution and max-pool, which paper A's code uses
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

    Default widths (32, 64, 128): the first layer keeps the resolution, each later one halves it, so a
    16x16 input gives a 128 x 4 x 4 map (stride 4) and 128-d pooled features. Sized after the ~530 img/s
    (forward + backward, batch 64, 2 threads, 16 px) that a 3-layer CNN reaches on the target machine.
    """

    def __init__(self, in_chans: int = 1, widths: Sequence[int] = (32, 64, 128)) -> None:
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

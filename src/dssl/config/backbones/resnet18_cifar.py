"""ResNet-18 with the CIFAR stem (``backbone: resnet18_cifar``), declared once; nothing to set.

ResNet-18 [0] (He et al., CVPR 2016), basic blocks [2, 2, 2, 2] of widths 64-128-256-512, 512-d pooled features,
with the CIFAR stem of paper B [1] (FedSSL / FedEMA) and of SimSiam's [2] CIFAR experiments: a 3x3 stride-1 first
convolution and no max-pool, overall stride 8. 11.17 M parameters at 3 channels (no classifier). Weights are
torchvision's random initialisation.

References:
    [0] ResNet, 2015, https://arxiv.org/abs/1512.03385
    [1] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [2] SimSiam, 2020, https://arxiv.org/abs/2011.10566
"""

from __future__ import annotations

from dssl.config.backbones import BackboneSpec
from dssl.specs import NoOptions

SPEC = BackboneSpec("resnet18_cifar", NoOptions, "models.cnn:resnet18_cifar", "cnn")

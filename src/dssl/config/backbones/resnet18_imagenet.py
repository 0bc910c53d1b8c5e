"""ResNet-18 with the ImageNet stem (``backbone: resnet18_imagenet``), declared once; nothing to set.

ResNet-18 [0] (He et al., CVPR 2016) as torchvision builds it: a 7x7 stride-2 convolution and a 3x3 stride-2
max-pool, basic blocks [2, 2, 2, 2] of widths 64-128-256-512, 512-d pooled features, overall stride 32; 11.18 M
parameters at 3 channels (11.69 M with its 1000-way classifier, torchvision's count). Paper A's [1] code pretrains
it on Mini-ImageNet. Weights are torchvision's random initialisation.

References:
    [0] ResNet, 2015, https://arxiv.org/abs/1512.03385
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

from dssl.config.backbones import BackboneSpec
from dssl.specs import NoOptions

SPEC = BackboneSpec("resnet18_imagenet", NoOptions, "models.cnn:resnet18_imagenet", "cnn")

"""The backbones, declared once (registry ``BACKBONE_SPECS``): one torch-free module per backbone, named after it.

Module ``<name>.py`` sets ``SPEC = BackboneSpec("<name>", <Name>Config, "models.<module>:<builder>", family)``. The
config dataclass (a :class:`dssl.specs.Options`) holds the builder's keyword options, each with its type, its
default and, for a number, its valid range; its docstring (or, for a backbone with nothing to set, its module's)
gives the architecture and cites the paper whose sizes it follows. ``family`` selects the optimizer recipe a model
trains with (paper A trains ViTs with AdamW, CNNs with SGD) and the evaluation protocols' ``per_family`` overrides.
``dssl.models.create_backbone`` builds a backbone from its spec; a stage's code lineage holds its own backbone's
spec and implementing modules only (``dssl.registry.SpecRegistry``).

Every backbone maps [B, C, H, W] images in [0, 1] to pooled features [B, feature_dim] and exposes ``feature_dim``.
CNNs also expose ``forward_features`` / ``feature_stride`` (``dssl.models.cnn``); ViTs expose the timm parts MAE
needs (``dssl.models.vit``).

| name | architecture | paper sizes |
|---|---|---|
| resnet18_cifar | ResNet-18, 3x3 stem, no max-pool | paper B (CIFAR) |
| resnet18_imagenet | ResNet-18, 7x7 stem + max-pool | paper A (Mini-ImageNet) |
| tiny_vit | ViT, patch 14 (224 px), dim 320, depth 9, 16 heads | paper A's Tiny-ViT |
| cnn_small | 3 conv-BN-ReLU layers (32, 64, 128) | embedded CPU profile |
| vit_small | ViT, 4 x 4 patches (patch = image side / 4), dim 96, depth 2, 4 heads | embedded CPU profile |

References:
    [A] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
    [B] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

from dssl.registry import SpecRegistry
from dssl.specs import EntrySpec

__all__ = ["BackboneSpec", "BACKBONE_SPECS", "FAMILIES", "Family"]

Family = Literal["cnn", "vit"]
FAMILIES: tuple[str, ...] = get_args(Family)


@dataclass(frozen=True)
class BackboneSpec(EntrySpec):
    """A backbone: its name, its builder's options' config dataclass, its builder ``(image_size, in_chans,
    **options) -> nn.Module``, and its family (``cnn`` or ``vit``)."""

    kind: ClassVar[str] = "backbone"

    family: Family

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"backbone {self.name!r}: family must be one of {', '.join(FAMILIES)}, "
                             f"got {self.family!r}")


BACKBONE_SPECS: SpecRegistry[BackboneSpec] = SpecRegistry.of("backbone")

"""The partition schemes, declared once (registry ``PARTITION_SCHEMES``): each scheme's name, its options as
a config dataclass (keys, types, defaults, ranges) and the function in ``dssl.data.partition`` that splits.

The validator (``dssl.config.sections.partitions``) takes every key, type and range from here, and
``dssl.data.partition`` its defaults and its names: a new scheme is one spec here plus its function there.
Paper A: Chen et al., ICLR 2026 (https://openreview.net/forum?id=c3yt5VSZPQ), released code
https://github.com/xuanyuLawrence/FedMAR-DecMAR; paper B: Zhuang et al., ICLR 2022
(https://arxiv.org/abs/2204.04385). Standard library only: the validator imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from dssl.config.options import CLIENTS, SEED
from dssl.config.ranges import Range
from dssl.registry import Registry
from dssl.specs import implementation, option_defaults

ALPHA_HINT = "Dirichlet concentration > 0; 1e5 ~ IID"


@dataclass(frozen=True)
class PartitionEntry:
    """What every ``partitions.<name>`` entry holds besides its scheme's options: the dataset it splits, the
    scheme, how many clients (paper A: 100 for FL, 20 for DecL; paper B: 5) and the seed of its draws."""

    dataset: str
    scheme: str
    clients: Annotated[int, CLIENTS]
    seed: Annotated[int, SEED]


@dataclass(frozen=True)
class IidOptions:
    """``iid``: an even random split; no options."""


@dataclass(frozen=True)
class DirichletBalancedOptions:
    """``dirichlet_balanced``: paper A's label non-IID (its released code's Sinkhorn-balanced Dirichlet). alpha
    has no default (paper A: 1 to 0.001, and 1e5 for IID); the code stops after 100 balancing rounds, which at
    alpha <= 0.01 leaves clients far from equal, so the default runs until every class is matched to half a
    sample, at most 10000 rounds; ``largest_remainder`` assigns every sample, ``floor`` is the code's rounding."""

    alpha: Annotated[float, Range(0, low_open=True)] = field(metadata={"hint": ALPHA_HINT})
    sinkhorn_iters: Annotated[int, Range(1, 100_000)] = 10000
    rounding: Literal["largest_remainder", "floor"] = "largest_remainder"


@dataclass(frozen=True)
class DirichletMinSizeOptions:
    """``dirichlet_min_size``: the per-class Dirichlet split redrawn until every client holds ``min_size``
    samples (Hsu et al. 2019, https://arxiv.org/abs/1909.06335; the minimum of 10 is FedMA's code's,
    https://github.com/IBM/FedMA)."""

    alpha: Annotated[float, Range(0, low_open=True)] = field(metadata={"hint": ALPHA_HINT})
    min_size: Annotated[int, Range(1, 10_000_000)] = 10


@dataclass(frozen=True)
class KClassesOptions:
    """``k_classes``: paper B's non-IID, every client holds ``classes_per_client`` whole classes (paper B: 2 of
    CIFAR-10's 10, up to 10; 20 of CIFAR-100's 100); no default."""

    classes_per_client: Annotated[int, Range(1, 100_000)]


@dataclass(frozen=True)
class AugmentOptions:
    """``feature``'s ``augment``: the ranges of each client's fixed augmentation, paper A's released code's
    (prepare_dataset.py, feature skew): ColorJitter(brightness = 0.5 u_i) with p = 0.8, GaussianBlur(5,
    sigma in (0.1, 2.0)) with p = 0.5, RandomHorizontalFlip (p = 0.5)."""

    brightness_max: Annotated[float, Range(0.0, 10.0)] = 0.5
    brightness_p: Annotated[float, Range(0.0, 1.0)] = 0.8
    blur_kernel: Annotated[int, Range(1, 255)] = 5
    blur_sigma: Annotated[tuple[float, float], Range(0.0, 100.0, low_open=True)] = field(
        default_factory=lambda: [0.1, 2.0])
    blur_p: Annotated[float, Range(0.0, 1.0)] = 0.5
    flip_p: Annotated[float, Range(0.0, 1.0)] = 0.5


@dataclass(frozen=True)
class FeatureOptions:
    """``feature``: paper A's feature non-IID, an even random split plus one fixed augmentation per client;
    ``augment`` overrides some of ``AugmentOptions``' ranges (empty: paper A's)."""

    augment: dict[str, Any] = field(default_factory=dict, metadata={"options": AugmentOptions})


@dataclass(frozen=True)
class PartitionScheme:
    """One scheme: its name, its options' dataclass and the function of ``dssl.data.partition`` that splits
    (``split(labels, clients, options, rng) -> (client indices, client augmentation, meta)``)."""

    name: str
    options: type
    function: str
    module: str = "data.partition"

    def defaults(self) -> dict[str, Any]:
        """The scheme's options with their defaults (None for a required one): a fresh dict."""
        return option_defaults(self.options)

    def split(self) -> Any:
        """The splitting function, imported now."""
        return implementation(self.module, self.function)


PARTITION_SCHEMES: Registry[PartitionScheme] = Registry("partition scheme")
for _scheme in (
    PartitionScheme("iid", IidOptions, "split_iid"),
    PartitionScheme("dirichlet_balanced", DirichletBalancedOptions, "split_dirichlet_balanced"),
    PartitionScheme("dirichlet_min_size", DirichletMinSizeOptions, "split_dirichlet_min_size"),
    PartitionScheme("k_classes", KClassesOptions, "split_k_classes"),
    PartitionScheme("feature", FeatureOptions, "split_feature"),
):
    PARTITION_SCHEMES.register(_scheme.name)(_scheme)

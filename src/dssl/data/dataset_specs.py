"""The datasets, declared once (registry ``DATASET_SPECS``): each dataset's name, its ``datasets.<name>`` options
as a config dataclass (keys, types, defaults, ranges), the facts the validator needs without its data (class
count, split sizes, whether it needs a folder, whether its test split is optional) and the module that
prepares it.

The validator (``dssl.config.sections.datasets``) takes every key, type and range from here, and
``dssl.data.datasets`` (the registry ``DATASETS`` of preparers) its names and defaults. Paper A (Chen et al.,
ICLR 2026, https://openreview.net/forum?id=c3yt5VSZPQ) pretrains on Mini-ImageNet and fine-tunes on CIFAR-10,
CIFAR-100 and ImageNet; paper B (Zhuang et al., ICLR 2022, https://arxiv.org/abs/2204.04385) uses CIFAR-10/100;
the embedded default uses scikit-learn's digits. Standard library only: the validator imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Mapping

from dssl.config.options import SEED
from dssl.config.ranges import Range, declared_options, number_problem
from dssl.registry import Registry
from dssl.specs import option_defaults

IMAGE_SIZE = Range(8, 1024)
CARVED_TEST = Range(0, 0.9, low_open=True)      # a dataset that must have a test split
OPTIONAL_TEST = Range(0, 0.9)                   # 0: every image pretrains, no test split


@dataclass(frozen=True)
class DigitsOptions:
    """``datasets.digits``: scikit-learn's 1797 8x8 digits with a stratified test split of ``test_fraction``
    (0.25: scikit-learn's ``train_test_split`` default) drawn with ``split_seed``."""

    test_fraction: Annotated[float, CARVED_TEST] = 0.25
    split_seed: Annotated[int, SEED] = 0


@dataclass(frozen=True)
class DigitsOnPhotosOptions:
    """``datasets.digits_on_photos``: the digits blended onto crops of scikit-learn's two colour photographs (Ganin
    et al. 2016's MNIST-M construction, https://arxiv.org/abs/1505.07818): ``image_size`` 24 px (three times the
    digits' 8, a small RGB image), ``composites_per_digit`` training composites per digit (1: the digits' own
    count), the digits' split (``test_fraction``, ``split_seed``, as ``digits``) and ``seed`` for the crops."""

    image_size: Annotated[int, IMAGE_SIZE] = 24
    composites_per_digit: Annotated[int, Range(1, 1000)] = 1
    test_fraction: Annotated[float, CARVED_TEST] = 0.25
    split_seed: Annotated[int, SEED] = 0
    seed: Annotated[int, SEED] = 0


@dataclass(frozen=True)
class Cifar10Options:
    """``datasets.cifar10``: the folder torchvision downloads into (``data/raw/<name>`` by default) and whether
    to check the official release's md5 (torchvision's default; false reads a CIFAR-format subset)."""

    root: str = "data/raw/cifar10"
    verify_md5: bool = True


@dataclass(frozen=True)
class Cifar100Options(Cifar10Options):
    """``datasets.cifar100``: as ``cifar10``, in its own folder."""

    root: str = "data/raw/cifar100"


@dataclass(frozen=True)
class MiniImagenetOptions:
    """``datasets.mini_imagenet``: a folder you give (no default), decoded at ``image_size`` 84 px (the few-shot
    benchmark's, Vinyals et al. 2016, https://arxiv.org/abs/1606.04080); ``test_fraction`` 0 keeps every image for
    pretraining (paper A evaluates on CIFAR and ImageNet), above 0 carves a test split with ``split_seed``."""

    root: str | None = field(default=None, metadata={"hint": "the folder holding the images"})
    image_size: Annotated[int, IMAGE_SIZE] = 84
    test_fraction: Annotated[float, OPTIONAL_TEST] = 0.0
    split_seed: Annotated[int, SEED] = 0


@dataclass(frozen=True)
class ImagenetOptions:
    """``datasets.imagenet``: a folder you give (no default), decoded at ``image_size`` 224 px (the ResNet and
    ViT input side of paper A's fine-tuning)."""

    root: str | None = field(default=None, metadata={"hint": "the folder holding the images"})
    image_size: Annotated[int, IMAGE_SIZE] = 224


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset: name, options, what is known of it without its data, and the module that prepares it
    (relative to ``dssl``; ``dssl.data.datasets`` builds its preparer from that module).

    ``image_shape``: ``[C, H, W]`` of the prepared images, None for RGB at the options' ``image_size``;
    ``source_images``: the images a test split is carved from (the digits); ``published_splits``: images per
    split as published (a folder's are counted once it is there)."""

    name: str
    options: type
    description: str
    num_classes: int
    module: str
    needs_root: bool = False
    optional_test: bool = False
    image_shape: tuple[int, int, int] | None = None
    source_images: int | None = None
    published_splits: Mapping[str, int] | None = None

    def defaults(self) -> dict[str, Any]:
        """The options with their defaults: a fresh dict."""
        return option_defaults(self.options)

    def train_size(self, spec: Any) -> int | None:
        """Training-split size known without the data (None when it needs a folder scan, or when the options
        it is computed from are not valid numbers: the validator reports those at their key paths)."""
        options = {**self.defaults(), **(spec if isinstance(spec, Mapping) else {})}
        declared = declared_options(self.options)
        if any(number_problem(options[key], declared[key]) for key in ("test_fraction", "composites_per_digit")
               if key in declared):
            return None
        if self.source_images is not None:
            from dssl.data.splits import carved_sizes   # exact counts, as the preparation carves them

            train = carved_sizes(self.source_images, options["test_fraction"])["train"]
            return train * options.get("composites_per_digit", 1)
        return None if self.needs_root or self.published_splits is None else self.published_splits["train"]


DIGITS_IMAGES = 1797   # scikit-learn's load_digits
DATASET_SPECS: Registry[DatasetSpec] = Registry("dataset")
for _spec in (
    DatasetSpec("digits", DigitsOptions, "scikit-learn handwritten digits, 8x8 grayscale, 10 classes (offline)",
                10, "data.digits", image_shape=(1, 8, 8), source_images=DIGITS_IMAGES),
    DatasetSpec("digits_on_photos", DigitsOnPhotosOptions,
                "scikit-learn digits blended onto crops of its two colour photographs (Ganin et al. 2016's MNIST-M "
                "construction), RGB, 10 classes (offline)", 10, "data.digits", source_images=DIGITS_IMAGES),
    DatasetSpec("cifar10", Cifar10Options, "CIFAR-10 via torchvision (download with md5 check), 32x32 RGB; "
                "verify_md5: false reads a CIFAR-format python tarball that is not the official release (a subset)",
                10, "data.cifar", image_shape=(3, 32, 32), published_splits={"train": 50000, "test": 10000}),
    DatasetSpec("cifar100", Cifar100Options, "CIFAR-100 via torchvision (download with md5 check), 32x32 RGB; "
                "verify_md5: false reads a CIFAR-format python tarball that is not the official release (a subset)",
                100, "data.cifar", image_shape=(3, 32, 32), published_splits={"train": 50000, "test": 10000}),
    # 100 classes x 600 images (Vinyals et al. 2016); pretrains on every image by default: a test split is optional
    DatasetSpec("mini_imagenet", MiniImagenetOptions,
                "Mini-ImageNet (100 classes of 600 images) from a user-supplied image folder: the few-shot split as "
                "distributed or one pooled folder (dssl.data.layouts); every image pretrains unless test_fraction > 0",
                100, "data.image_folders", needs_root=True, optional_test=True, published_splits={"train": 60_000}),
    # ILSVRC-2012 train and val
    DatasetSpec("imagenet", ImagenetOptions,
                "ImageNet-1k from a user-supplied image folder (train/ and val/ by class)", 1000,
                "data.image_folders", needs_root=True, published_splits={"train": 1_281_167, "test": 50_000}),
):
    DATASET_SPECS.register(_spec.name)(_spec)

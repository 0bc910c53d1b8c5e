"""The protocols' configuration dataclasses, kept free of torch so the params validator can read them.

A field of a config is a key a params file may set under ``evaluate.<protocol>`` (except the keys a
protocol's name fixes: its spec, ``dssl.config.protocols``). A number's range is declared once, in its annotation
(``Annotated[int, Range(1, 100_000)]``): the params validator reads it, and ``__post_init__`` checks a config
built in code against it (``dssl.config.ranges.range_problems``); ``__post_init__`` adds only what one range
cannot say (a name from a list, ``warmup_epochs`` below ``epochs``, ``crop_scale``'s order).

Every protocol takes the step options of ``dssl.training.options`` (``device``, ``precision``,
``channels_last``, ``compile``); their defaults are the plain fp32 step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from dssl.config.ranges import Range, range_problems
from dssl.specs import Options
from dssl.training.options import StepOptions, step_problems

OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("cosine", "constant")   # after the linear warm-up
CROPS = ("translate", "resized")
POOLS = ("token", "avg")


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(frozen=True)
class StepConfig(Options):
    """Where and how a protocol's forward and training steps run (``dssl.training.options``); checked against
    the step options and the declared ranges when made."""

    device: str = "auto"
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False

    def __post_init__(self) -> None:
        problems = [f"{key}: {message}" for key, message in
                    step_problems({k: getattr(self, k) for k in ("device", "precision", "channels_last", "compile")})]
        problems += range_problems(self)
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def step_options(self) -> StepOptions:
        return StepOptions(self.precision, self.channels_last, self.compile)


@dataclass(frozen=True)
class LinearProbeConfig(StepConfig):
    """A linear head on frozen features, its lr, weight decay and epoch selected on a validation split.

    Paper B (https://arxiv.org/abs/2204.04385) trains it with Adam, lr 3e-3, 200 epochs; these defaults search
    the lr and weight decay over a small grid for 100 epochs instead."""

    val_fraction: Annotated[float, Range(0.0, 1.0, low_open=True, high_open=True)] = 0.1
    lr_grid: Annotated[tuple[float, ...], Range(0.0, 100.0, low_open=True)] = (1e-3, 3e-3, 1e-2)
    weight_decay_grid: Annotated[tuple[float, ...], Range(0.0, 10.0)] = (0.0, 1e-4)
    epochs: Annotated[int, Range(1, 100_000)] = 100
    batch_size: Annotated[int, Range(1, 65_536)] = 256
    eval_every: Annotated[int, Range(1, 100_000)] = 5
    feature_batch_size: Annotated[int, Range(1, 65_536)] = 256


@dataclass(frozen=True)
class FewShotConfig(LinearProbeConfig):
    """A linear probe trained on ``label_fraction`` of the training labels (paper B: 1 % and 10 %).

    ``draws``: how many independent draws of the validation split and the labelled subset the score
    averages (draw 0 is the seed's own, so ``draws: 1`` is the single draw). With few labels the draw
    dominates the score's variance: on the embedded digits its standard deviation over draws for one
    encoder is ~2.7 pp at 10 %, more than the pretraining gain, while the encoder's pretraining seed
    adds almost none (docs/evidence.md); averaging R draws divides that part by sqrt(R)."""

    label_fraction: Annotated[float, Range(0.0, 1.0, low_open=True)] = 0.1
    draws: Annotated[int, Range(1, 10_000)] = 1


@dataclass(frozen=True)
class KnnConfig(StepConfig):
    """Weighted kNN on L2-normalised features; defaults of the InstDisc / DINO kNN monitor."""

    val_fraction: Annotated[float, Range(0.0, 1.0, low_open=True, high_open=True)] = 0.1
    k: Annotated[int, Range(1, 100_000)] = 20
    temperature: Annotated[float, Range(0.0, low_open=True)] = 0.07
    feature_batch_size: Annotated[int, Range(1, 65_536)] = 256
    query_batch_size: Annotated[int, Range(1, 65_536)] = 256


@dataclass(frozen=True)
class FineTuneConfig(StepConfig):
    """Full fine-tuning; the defaults are the small-scale recipe of the embedded profile.

    Schedule: ``lr_grid`` holds the learning rates tried (absolute, or base rates scaled by
    ``batch_size / lr_reference_batch`` when that is set: MAE's ``lr = blr * batch / 256``); a linear
    warm-up over ``warmup_epochs``, then ``schedule`` (``cosine`` down to ``min_lr``, or ``constant``).
    Optimizer: ``optimizer`` with ``weight_decay`` (``exclude_norm_bias_from_decay``: none on biases,
    norms and 1-D tensors, MAE's rule), ``layer_decay`` < 1 scales a ViT block's lr by
    ``layer_decay ** (depth + 1 - layer)`` (BEiT / MAE). Model: ``pool`` (``token`` = the class token
    after the final norm; ``avg`` = mean of the patch tokens, then a fresh LayerNorm: MAE's fine-tuning),
    ``drop_path`` (stochastic depth rate of the last ViT block, linear over depth). Augmentation:
    ``crop`` (``translate`` by up to ``crop_padding`` px, or ``resized``: random-resized crop of area
    fraction ``crop_scale``), ``hflip``, ``rand_augment`` (a timm RandAugment string such as
    ``rand-m9-mstd0.5-inc1``; empty: none), ``random_erasing`` (probability), ``mixup`` / ``cutmix``
    (Beta alphas; 0: off) with ``mixup_prob`` and ``mixup_switch_prob``, ``label_smoothing``.
    """

    val_fraction: Annotated[float, Range(0.0, 1.0, low_open=True, high_open=True)] = 0.1
    lr_grid: Annotated[tuple[float, ...], Range(0.0, 100.0, low_open=True)] = (1e-3, 3e-4)
    lr_reference_batch: Annotated[int, Range(0, 65_536)] = 0          # 0: lr_grid values are absolute learning rates
    optimizer: str = "adamw"
    weight_decay: Annotated[float, Range(0.0, 10.0)] = 0.05
    exclude_norm_bias_from_decay: bool = False
    momentum: Annotated[float, Range(0.0, 1.0, high_open=True)] = 0.9
    epochs: Annotated[int, Range(1, 100_000)] = 20
    warmup_epochs: Annotated[int, Range(0, 100_000)] = 0
    schedule: str = "cosine"
    min_lr: Annotated[float, Range(0.0)] = 0.0
    layer_decay: Annotated[float, Range(0.0, 1.0, low_open=True)] = 1.0
    batch_size: Annotated[int, Range(1, 65_536)] = 64
    eval_every: Annotated[int, Range(1, 100_000)] = 1
    pool: str = "token"
    drop_path: Annotated[float, Range(0.0, 1.0, high_open=True)] = 0.0
    crop: str = "translate"
    crop_padding: Annotated[int, Range(0, 1024)] = 2
    crop_scale: Annotated[tuple[float, float], Range(0.0, 1.0, low_open=True)] = (0.08, 1.0)
    hflip: bool = False
    rand_augment: str = ""
    random_erasing: Annotated[float, Range(0.0, 1.0)] = 0.0
    mixup: Annotated[float, Range(0.0)] = 0.0
    cutmix: Annotated[float, Range(0.0)] = 0.0
    mixup_prob: Annotated[float, Range(0.0, 1.0)] = 1.0
    mixup_switch_prob: Annotated[float, Range(0.0, 1.0)] = 0.5
    label_smoothing: Annotated[float, Range(0.0, 1.0, high_open=True)] = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.optimizer in OPTIMIZERS,
               f"unknown fine-tuning optimizer {self.optimizer!r}; known: {', '.join(OPTIMIZERS)}")
        _check(self.schedule in SCHEDULES, f"unknown schedule {self.schedule!r}; known: {', '.join(SCHEDULES)}")
        _check(self.crop in CROPS, f"unknown crop {self.crop!r}; known: {', '.join(CROPS)}")
        _check(self.pool in POOLS, f"unknown pool {self.pool!r}; known: {', '.join(POOLS)}")
        _check(len(self.lr_grid) > 0, "lr_grid must be a non-empty list of positive learning rates, got []")
        _check(self.warmup_epochs < self.epochs or self.warmup_epochs == 0,
               f"warmup_epochs must be in 0..epochs - 1 ({self.epochs - 1}), got {self.warmup_epochs}")
        _check(len(self.crop_scale) == 2 and self.crop_scale[0] <= self.crop_scale[1],
               f"crop_scale must be [low, high] with 0 < low <= high <= 1, got {list(self.crop_scale)}")
        if self.rand_augment:
            _check(self.rand_augment.startswith("rand-"), f"rand_augment must be a timm RandAugment string "
                                                          f"such as 'rand-m9-mstd0.5-inc1', got {self.rand_augment!r}")

    def learning_rate(self, lr: float) -> float:
        """The peak learning rate of grid value ``lr`` (scaled by the batch when a reference is set)."""
        return lr * self.batch_size / self.lr_reference_batch if self.lr_reference_batch else lr

    @property
    def mixes(self) -> bool:
        return (self.mixup > 0 or self.cutmix > 0) and self.mixup_prob > 0

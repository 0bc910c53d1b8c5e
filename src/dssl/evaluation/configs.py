"""The protocols' configuration dataclasses, kept free of torch so the params validator can read them.

A field of a config is a key a params file may set under ``evaluate.<protocol>`` (except the keys a
registered protocol name fixes, see ``registry``). Value checks live in ``__post_init__`` so a bad value
fails when the config is built, in the validator as in a stage.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, TypeVar

OPTIMIZERS = ("adamw", "sgd")

C = TypeVar("C")


def coerce_config(cls: type[C], config: C | Mapping[str, Any] | None) -> C:
    """A protocol config from a dataclass instance, a params mapping (lists become tuples) or None."""
    if config is None:
        return cls()
    if isinstance(config, cls):
        return config
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(config) - known
    if unknown:
        raise TypeError(f"unknown {cls.__name__} keys {sorted(unknown)}; known: {sorted(known)}")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})


def _check_val_fraction(value: float) -> None:
    if not 0 < value < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {value}")


@dataclass(frozen=True)
class LinearProbeConfig:
    val_fraction: float = 0.1
    lr_grid: tuple[float, ...] = (1e-3, 3e-3, 1e-2)
    weight_decay_grid: tuple[float, ...] = (0.0, 1e-4)
    epochs: int = 100
    batch_size: int = 256
    eval_every: int = 5
    feature_batch_size: int = 256

    def __post_init__(self) -> None:
        _check_val_fraction(self.val_fraction)


@dataclass(frozen=True)
class FewShotConfig(LinearProbeConfig):
    """A linear probe trained on ``label_fraction`` of the training labels (paper B: 1 % and 10 %)."""

    label_fraction: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.label_fraction <= 1:
            raise ValueError(f"label_fraction must be in (0, 1], got {self.label_fraction}")


@dataclass(frozen=True)
class KnnConfig:
    """Weighted kNN on L2-normalised features; defaults of the InstDisc / DINO kNN monitor."""

    val_fraction: float = 0.1
    k: int = 20
    temperature: float = 0.07
    feature_batch_size: int = 256
    query_batch_size: int = 256

    def __post_init__(self) -> None:
        _check_val_fraction(self.val_fraction)
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be a positive integer, got {self.k!r}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")


@dataclass(frozen=True)
class FineTuneConfig:
    val_fraction: float = 0.1
    lr_grid: tuple[float, ...] = (1e-3, 3e-4)
    optimizer: str = "adamw"
    weight_decay: float = 0.05
    momentum: float = 0.9
    epochs: int = 20
    warmup_epochs: int = 0
    batch_size: int = 64
    eval_every: int = 1
    crop_padding: int = 2
    hflip: bool = False

    def __post_init__(self) -> None:
        _check_val_fraction(self.val_fraction)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown fine-tuning optimizer {self.optimizer!r}; known: {', '.join(OPTIMIZERS)}")

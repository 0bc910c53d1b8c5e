"""The step options a params file may set, without torch (the validator reads them).

Every training section (``pretrain.<framework>.train``, a strategy entry's ``train`` override) and
every evaluation protocol (``evaluate.<protocol>``) takes the same four keys:

- ``device``: ``auto`` (the first GPU when there is one, else the CPU; ``DSSL_DEVICE`` may name
  another), ``cpu``, or ``cuda`` (a GPU or an error before training: never a silent CPU run);
- ``precision``: ``fp32``, or ``bf16`` (forward and loss under bfloat16 autocast; weights, gradients
  and optimizer state stay fp32);
- ``channels_last``: the model and 4-D batches in channels-last memory format (GPU convolutions);
- ``compile``: ``torch.compile`` of the model's parts.

The defaults (``auto``, ``fp32``, off, off) are the plain step every embedded result was produced with.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

PRECISIONS = ("fp32", "bf16")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class StepOptions:
    """How one training step runs; the defaults are the plain fp32 step (see the module docstring)."""

    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False

    def validate(self) -> None:
        problems = step_problems({f.name: getattr(self, f.name) for f in fields(self)})
        if problems:
            raise ValueError("; ".join(f"{key}: {message}" for key, message in problems))

    @property
    def plain(self) -> bool:
        """True for the default fp32, contiguous, eager step."""
        return self == StepOptions()

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> StepOptions:
        """The options among ``values`` (other keys are ignored), defaults for the rest."""
        options = cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})
        options.validate()
        return options


STEP_KEYS = ("device", *(f.name for f in fields(StepOptions)))


def step_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(key, message)`` for every step key of ``values`` whose value is not allowed."""
    problems = []
    if "device" in values and values["device"] not in DEVICES:
        problems.append(("device", f"unknown device {values['device']!r}; one of: {', '.join(DEVICES)}"))
    if "precision" in values and values["precision"] not in PRECISIONS:
        problems.append(("precision", f"unknown precision {values['precision']!r}; one of: {', '.join(PRECISIONS)}"))
    for key in ("channels_last", "compile"):
        if key in values and not isinstance(values[key], bool):
            problems.append((key, f"must be true or false, got {values[key]!r}"))
    return problems

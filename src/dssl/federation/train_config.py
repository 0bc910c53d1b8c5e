"""The training settings FL and DecL share (``TrainConfig``): rounds, local epochs, batch size, seed,
optimizer and how each local step runs; ``FLConfig`` and ``DecLConfig`` add their framework's own."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Any, Mapping

from dssl.config.options import BATCH, EPOCHS, ROUNDS, SEED
from dssl.config.ranges import Range, range_problems
from dssl.federation.local import OptimizerConfig, StepOptions


@dataclass(frozen=True)
class TrainConfig:
    """Settings shared by FL and DecL (paper A, appendix A.2 for the paper-scale values).

    ``precision`` (``fp32`` | ``bf16``), ``channels_last`` and ``compile`` choose how each local step
    runs (``local.StepOptions``: bf16 autocast, channels-last memory format, ``torch.compile``). They
    are off by default, which is the plain fp32 step every existing result was produced with.
    """

    rounds: Annotated[int, ROUNDS]
    local_epochs: Annotated[int, EPOCHS] = 1
    batch_size: Annotated[int, BATCH] = 32
    seed: Annotated[int, SEED] = 0
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    drop_last: bool = True
    deterministic: bool = True
    checkpoint_every: Annotated[int, Range(1)] = 1  # rounds between checkpoints; the last round is always saved
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        """Build from a params mapping; ``optimizer`` may be a nested mapping."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise TypeError(f"unknown {cls.__name__} keys {sorted(unknown)}; known: {sorted(known)}")
        values = dict(values)
        if isinstance(values.get("optimizer"), Mapping):
            values["optimizer"] = OptimizerConfig.from_dict(values["optimizer"])
        return cls(**values)

    def validate(self) -> None:
        """Each number in the range its field declares (the ranges the params validator checks the schedule
        sections against, ``dssl.config.options``), and the step options."""
        problems = range_problems(self)
        if problems:
            raise ValueError(f"{type(self).__name__}: {'; '.join(problems)}")
        self.step_options().validate()

    def step_options(self) -> StepOptions:
        """The local step's options (``precision``, ``channels_last``, ``compile``)."""
        return StepOptions(self.precision, self.channels_last, self.compile)

    def identity(self) -> dict[str, Any]:
        """The settings that decide a run's result, for the checkpoint fingerprint.

        ``checkpoint_every`` does not change the result. Step options enter only when not at their
        default, so runs with the plain step keep the fingerprints (and checkpoints) they had before
        these options existed; a bf16, channels-last or compiled run never resumes a plain one.
        """
        values = dataclasses.asdict(self)
        values.pop("checkpoint_every")
        default = StepOptions()
        for name in ("precision", "channels_last", "compile"):
            if values[name] == getattr(default, name):
                values.pop(name)
        return values

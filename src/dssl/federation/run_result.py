"""What a simulator run returns (``RunResult``) and the split of its per-round records into what the
run's inputs decide (``round_outcomes``) and what the clock does (``round_timings``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from dssl.federation.state import StateDict


@dataclass
class RunResult:
    """The outcome of a run. ``final_state`` is the model to evaluate (FL: the global model
    ``final_index``, which ``Strategy.final_global_index`` chooses, 0 unless a strategy keeps several;
    DecL: the average of all clients, index 0); ``metrics`` holds one record per round (see
    ``Simulator.run``)."""

    final_state: StateDict
    global_states: list[StateDict]
    metrics: list[dict]
    schedule: list[list[int]]
    resumed_rounds: int
    fingerprint: str
    final_index: int = 0


# The keys of a round's record (``Simulator.run``) that measure time, and what the round's checkpoint wrote
# (whether a round is checkpointed depends on the clock): they differ from run to run, whereas everything
# else in the record is a function of the run's inputs, as its weights are.
ROUND_TIMINGS = ("train_time_s", "wall_time_s", "images_per_s", "checkpoint_s", "checkpoint_bytes")


def round_outcomes(metrics: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The per-round records without their timings: the same for every run of the same inputs."""
    return [{key: value for key, value in record.items() if key not in ROUND_TIMINGS} for record in metrics]


def round_timings(metrics: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Each timing of the per-round records, round after round (0 where a record lacks it)."""
    return {key: [float(record.get(key, 0.0)) for record in metrics] for key in ROUND_TIMINGS}

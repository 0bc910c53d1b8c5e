"""Seeds and determinism for the simulators.

Every random stream of a run is derived from the run seed and a key, never carried over from one
round to the next: the shuffling, augmentation and view/mask generators of client ``c`` in round ``r``,
and the global torch RNG reseeded before that client trains (dropout and the like), depend only on
``(seed, r, c)``. A resumed run therefore replays exactly the streams an uninterrupted run would have
drawn, and a checkpoint needs no generator state beyond the client schedule.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import torch

from dssl.training.determinism import configure_determinism  # noqa: F401  (the simulators' vocabulary)


class Stream(IntEnum):
    """Independent random streams of a run (the last component of a derived seed's key)."""

    SCHEDULE = 0
    SHUFFLE = 1
    AUGMENT = 2
    MODEL = 3
    GLOBAL = 4


def derive_seed(seed: int, *keys: int) -> int:
    """A 63-bit seed for the stream named by ``keys``, statistically independent of other keys."""
    sequence = np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(int(k) for k in keys))
    return int(sequence.generate_state(1, np.uint64)[0] >> np.uint64(1))


def torch_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def seed_global_rng(seed: int, device: torch.device) -> None:
    """Seed the global RNG that ops on ``device`` draw from (dropout, drop-path): on a CPU device,
    the CPU generator alone -- the state ``torch.manual_seed`` gives it. ``torch.manual_seed`` also
    seeds every accelerator backend, and one not yet initialised (CUDA in a CUDA build of torch on a
    CPU-only machine) formats and stores a stack trace of the call to replay later; per client that was
    a third of the simulator's own time (1.4 ms of it became 0.9 ms at one-step clients on a 2-core CPU).
    On an accelerator ``torch.manual_seed`` is used."""
    if device.type == "cpu":
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)


def global_rng_state() -> dict:
    """The global torch RNG states (CPU and every CUDA device), for checkpoints."""
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_global_rng_state(state: dict) -> None:
    # RNG states must be CPU byte tensors, whatever device a checkpoint was loaded to.
    torch.set_rng_state(state["cpu"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])

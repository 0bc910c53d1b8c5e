"""Tiny SimSiam runs with checkpoints for the simulator tests.

``abort_after`` interrupts a run in-process; ``run_until_paused`` is the body of the process the kill-and-resume test
SIGKILLs: it trains with checkpoints, writes a marker after a given number of optimiser steps and then hangs there.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from dssl.data.imageset import ArrayImageSet
from dssl.federation import (
    ClientData,
    DecLConfig,
    DecLSimulator,
    FLConfig,
    FLSimulator,
    OptimizerConfig,
    RunResult,
    create_strategy,
)
from dssl.methods import create_method

NUM_CLIENTS = 4
PER_CLIENT = 12
BATCH = 6
ROUNDS = 4
# Ring of 4 with Metropolis-Hastings weights (every degree is 2: 1/3 to each neighbour and self).
RING = np.array([[1, 1, 0, 1], [1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 1, 1]], dtype=np.float64) / 3
STEPS_PER_CLIENT_ROUND = PER_CLIENT // BATCH
STEPS_PER_ROUND = {"fl": 2 * STEPS_PER_CLIENT_ROUND, "decl": NUM_CLIENTS * STEPS_PER_CLIENT_ROUND}


def tiny_images(num: int = NUM_CLIENTS * PER_CLIENT, size: int = 8, seed: int = 0) -> ArrayImageSet:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(num, size, size, 1), dtype=np.uint8)
    return ArrayImageSet(pixels, rng.integers(0, 3, size=num), 3)


def build(kind: str, checkpoint_dir: Path | None = None, seed: int = 3, **kwargs):
    torch.manual_seed(0)
    method = create_method("simsiam", "cnn_small", image_size=8, in_chans=1)
    images = tiny_images()
    clients = [ClientData(images, np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT)) for i in range(NUM_CLIENTS)]
    strategy = create_strategy("fedavg", aggregation="data_size")
    common = dict(rounds=ROUNDS, local_epochs=1, batch_size=BATCH, seed=seed,
                  optimizer=OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=1e-4))
    if kind == "fl":
        return FLSimulator(method, clients, strategy, FLConfig(clients_per_round=2, **common),
                           checkpoint_dir=checkpoint_dir, **kwargs)
    return DecLSimulator(method, clients, strategy, RING, DecLConfig(**common), checkpoint_dir=checkpoint_dir, **kwargs)


class Abort(Exception):
    """Raised by ``abort_after``: an interruption the resume tests then recover from."""


def after_steps(simulator, steps: int, action: Callable[[], None]) -> None:
    """Make the run call ``action`` right after its ``steps``-th optimiser step."""
    count = 0
    original = simulator.method.after_optimizer_step

    def counting_step() -> None:
        nonlocal count
        original()
        count += 1
        if count == steps:
            action()

    simulator.method.after_optimizer_step = counting_step


def abort_after(simulator, steps: int) -> None:
    """Make the run raise ``Abort`` right after its ``steps``-th optimiser step (an interrupted run)."""
    def abort() -> None:
        raise Abort

    after_steps(simulator, steps, abort)


def pause_after(simulator, steps: int, marker: Path) -> None:
    """Make the run announce itself and hang after ``steps`` optimiser steps (for SIGKILL)."""
    def pause() -> None:
        marker.write_text("paused")
        time.sleep(600)

    after_steps(simulator, steps, pause)


def run(kind: str, checkpoint_dir: Path | None = None, seed: int = 3) -> RunResult:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # same kernels in every process: bitwise-equal results
    try:
        return build(kind, checkpoint_dir, seed).run()
    finally:
        torch.set_num_threads(threads)


def run_until_paused(kind: str, checkpoint_dir: Path, pause_at_step: int, marker: Path) -> None:
    torch.set_num_threads(1)
    simulator = build(kind, checkpoint_dir)
    pause_after(simulator, pause_at_step, marker)
    simulator.run()

"""The cost of torch's NaN fill of new tensors in deterministic mode, per training step.

``torch.use_deterministic_algorithms(True)`` also turns on
``torch.utils.deterministic.fill_uninitialized_memory``: every newly allocated tensor is filled with
NaN. ``dssl.federation.reproducibility.configure_determinism`` switches the fill off (tests show every
strategy trains to the same bits either way); this script measures what that saves.

Setting: the embedded profile's training step (``TrainStep``, SGD) in deterministic mode on random
16 px single-channel images, batch 32, one torch thread, for each ``--models`` entry. The fill is
switched on and off in alternation, ``--steps`` steps at a time, ``--repeats`` times, so that both see
the same machine load; the medians of the step times are reported.

    PYTHONPATH=src python benchmarks/determinism_fill.py [--models simsiam:cnn_small,mae:vit_small]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from dssl.federation.local import OptimizerConfig, TrainStep, build_optimizer
from dssl.federation.reproducibility import configure_determinism
from dssl.methods import create_method

IMAGE_SIZE, BATCH = 16, 32
MODELS = "simsiam:cnn_small,byol:cnn_small,simsiam:vit_small,mae:vit_small"


def step_times(method_name: str, backbone: str, steps: int, repeats: int) -> dict[bool, list[float]]:
    """Step times (s) with the fill on (True) and off (False), measured in alternation."""
    torch.manual_seed(0)
    method = create_method(method_name, backbone, IMAGE_SIZE, 1)
    step = TrainStep(method, build_optimizer(method, OptimizerConfig(), OptimizerConfig().lr(BATCH)))
    batch = torch.rand(BATCH, 1, IMAGE_SIZE, IMAGE_SIZE)
    views = torch.Generator().manual_seed(0)
    step(batch, lambda x: method.training_loss(x, generator=views))  # warm-up
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for fill in (True, False):
            torch.utils.deterministic.fill_uninitialized_memory = fill
            for _ in range(steps):
                start = time.perf_counter()
                step(batch, lambda x: method.training_loss(x, generator=views))
                times[fill].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=MODELS, help="comma-separated method:backbone pairs")
    parser.add_argument("--steps", type=int, default=15, help="steps per turn")
    parser.add_argument("--repeats", type=int, default=6, help="turns of each setting")
    args = parser.parse_args()
    pairs = [entry.split(":") for entry in args.models.split(",")]
    if any(len(pair) != 2 for pair in pairs) or args.steps < 1 or args.repeats < 1:
        raise SystemExit("--models takes method:backbone pairs separated by commas (e.g. simsiam:cnn_small); "
                         "--steps and --repeats must be >= 1")
    torch.set_num_threads(1)
    configure_determinism(True)
    print(f"setting: {IMAGE_SIZE} px, batch {BATCH}, 1 thread, deterministic mode; "
          f"{args.repeats} turns of {args.steps} steps per setting, medians")
    for method_name, backbone in pairs:
        times = step_times(method_name, backbone, args.steps, args.repeats)
        filled, unfilled = statistics.median(times[True]), statistics.median(times[False])
        print(f"{method_name:<8} {backbone:<10} step with fill {filled * 1e3:7.2f} ms, without {unfilled * 1e3:7.2f} ms"
              f"  saving {100 * (1 - unfilled / filled):5.1f} %")


if __name__ == "__main__":
    main()

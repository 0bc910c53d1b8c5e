"""Fine-tuning and linear-probe runs with checkpoints, stopped on purpose, for the resume tests.

``run`` evaluates a tiny encoder on separable images; ``stop_after`` makes a run raise ``Preempted``
right after its n-th optimiser step, as a SIGTERM would (``dssl.training.preemption``); ``hang_after``
writes a marker and sleeps there, for a test that SIGKILLs the process (``python resume_helper.py``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from dssl.evaluation import evaluate
from dssl.evaluation.progress import Checkpoint
from dssl.models.backbones import create_backbone
from dssl.training import preemption

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from evaluation_helpers import separable_images  # noqa: E402

SIZE = 8
# Fine-tuning with every random stream of the recipe in play: shuffling, translation and flip (torch
# generator), mixup / cutmix (numpy generator), random erasing (global RNG), RandAugment (per batch).
CONFIGS = {
    "finetune": {"epochs": 3, "lr_grid": [3e-3, 1e-3], "batch_size": 16, "crop_padding": 1, "hflip": True,
                 "mixup": 0.8, "cutmix": 1.0, "label_smoothing": 0.1, "random_erasing": 0.5,
                 "rand_augment": "rand-m9-mstd0.5-inc1", "warmup_epochs": 1, "eval_every": 1},
    "finetune_vit": {"epochs": 2, "lr_grid": [3e-3], "batch_size": 16, "crop": "resized", "hflip": True,
                     "layer_decay": 0.75, "pool": "avg", "drop_path": 0.2, "exclude_norm_bias_from_decay": True,
                     "mixup": 0.8, "cutmix": 1.0, "lr_reference_batch": 256, "min_lr": 1e-5},
    "linear_probe_10pct": {"epochs": 6, "eval_every": 2, "lr_grid": [1e-2, 3e-2], "weight_decay_grid": [0.0, 1e-4],
                           "batch_size": 8},
    # three label draws: a stop in the second draw resumes there, the first draw's result kept
    "linear_probe_10pct_draws": {"epochs": 6, "eval_every": 2, "lr_grid": [1e-2, 3e-2], "weight_decay_grid": [0.0],
                                 "batch_size": 8, "draws": 3},
}
PROTOCOL = {"finetune": "finetune", "finetune_vit": "finetune", "linear_probe_10pct": "linear_probe_10pct",
            "linear_probe_10pct_draws": "linear_probe_10pct"}


def encoder(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_backbone("vit_small" if name == "finetune_vit" else "cnn_small", SIZE, 1)


def data():
    return separable_images(96, seed=4, size=SIZE), separable_images(30, seed=5, size=SIZE)


def run(name: str, folder: Path | None = None, every_s: float = 0.0) -> dict:
    """One protocol run; with ``folder``, checkpointed there after every epoch (``every_s`` 0) or once
    ``every_s`` seconds have passed since the last write."""
    train, test = data()
    checkpoint = Checkpoint(folder, "fingerprint", every_s) if folder is not None else None
    return evaluate(PROTOCOL[name], encoder(name), train, test, CONFIGS[name], seed=3, checkpoint=checkpoint)


def after_steps(steps: int, action) -> None:
    """Call ``action`` at the safe point right after the ``steps``-th optimiser step of a protocol run
    (before the protocol looks whether a stop was requested)."""
    import dssl.evaluation.finetune as finetune
    import dssl.evaluation.linear_probe as linear_probe
    from dssl.evaluation import progress

    count = 0

    def counting(checkpoint, state_fn, end_of_epoch, where):
        nonlocal count
        if not end_of_epoch:
            count += 1
            if count == steps:
                action()
        progress.save_point(checkpoint, state_fn, end_of_epoch, where)

    finetune.save_point = linear_probe.save_point = counting


def count_steps() -> list[int]:
    """A list that grows by one at every optimiser step of the protocol runs from now on."""
    steps: list[int] = []
    after_steps(0, lambda: None)
    import dssl.evaluation.finetune as finetune

    counting = finetune.save_point

    def recording(checkpoint, state_fn, end_of_epoch, where):
        if not end_of_epoch:
            steps.append(1)
        counting(checkpoint, state_fn, end_of_epoch, where)

    import dssl.evaluation.linear_probe as linear_probe

    finetune.save_point = linear_probe.save_point = recording
    return steps


def restore() -> None:
    import dssl.evaluation.finetune as finetune
    import dssl.evaluation.linear_probe as linear_probe
    from dssl.evaluation import progress

    finetune.save_point = linear_probe.save_point = progress.save_point
    preemption.reset()


def stop_after(steps: int) -> None:
    """As a SIGTERM arriving during step ``steps``: the run checkpoints there and raises ``Preempted``."""
    preemption.reset()
    after_steps(steps, lambda: preemption._on_signal(preemption.signal.SIGTERM, None))


def hang_after(steps: int, marker: Path) -> None:
    def hang() -> None:
        marker.write_text("paused")
        time.sleep(600)

    after_steps(steps, hang)


if __name__ == "__main__":   # python resume_helper.py <name> <checkpoint folder> <step> <marker>
    torch.set_num_threads(1)
    name, folder, step, marker = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    hang_after(step, marker)
    run(name, folder)

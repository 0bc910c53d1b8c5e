"""Deterministic kernels, process-wide: what pretraining and evaluation both run under."""

from __future__ import annotations

import os

import torch


def configure_determinism(enabled: bool = True) -> None:
    """Ask torch for deterministic kernels (process-wide).

    Strict (``warn_only=False``): with ``warn_only=True`` torch only warns where a kernel is not
    deterministic, and it then runs the GPU attention kernels (flash, memory-efficient, cuDNN) in their
    non-deterministic form: two Tiny-ViT runs on an H200 ended 0.018 apart (``benchmarks/gpu_determinism.py``).
    Strict, they take their deterministic paths at no measured cost, and an op without a deterministic
    variant stops the run naming itself rather than changing its results silently. On CPU every op the
    simulators use is deterministic for a fixed thread count.

    Deterministic mode also makes torch fill every newly allocated tensor with NaN
    (``torch.utils.deterministic.fill_uninitialized_memory``), a guard for programs that read memory
    they never wrote. No op here does (results are the same bits with and without the fill), and the
    fill costs a few per cent of a training step, varying from run to run (``benchmarks/determinism_fill.py``
    prints the figures; ~390 fills per step at 16 px, batch 32), so it is switched off; torch's
    documentation states that a valid program stays deterministic without it.
    """
    if enabled:
        # cuBLAS needs this before its first use to be deterministic (a no-op on CPU).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(enabled, warn_only=False)
    torch.utils.deterministic.fill_uninitialized_memory = False
    torch.backends.cudnn.benchmark = not enabled
    torch.backends.cudnn.deterministic = enabled

"""The linear probe on frozen features (``evaluate.linear_probe``), declared once.

References:
    [0] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385

Paper B's [0] linear evaluation: a linear head on the frozen 512-d features, Adam, lr 3e-3, 200 epochs. This code
selects the learning rate, weight decay and epoch on a validation split: its defaults are lr in (1e-3, 3e-3, 1e-2),
weight decay in (0, 1e-4), 100 epochs, batch 256 (``dssl.evaluation.configs.LinearProbeConfig``).
"""

from __future__ import annotations

from dssl.config.protocols import ProtocolSpec
from dssl.evaluation.configs import LinearProbeConfig

SPEC = ProtocolSpec("linear_probe", LinearProbeConfig, "evaluation.linear_probe:evaluate")

"""The few-shot linear probe on 1 % of the labels (``evaluate.linear_probe_1pct``), declared once.

References:
    [0] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385

Paper B's [0] semi-supervised evaluation: a linear head on frozen features trained on a class-balanced 1 % of the
training labels (Adam, lr 1e-3, 100 epochs). The name fixes ``label_fraction`` to 0.01; the other keys are the linear
probe's (``dssl.evaluation.configs.FewShotConfig``), selected on a validation split disjoint from the labels.
"""

from __future__ import annotations

from dssl.config.protocols import ProtocolSpec
from dssl.config.protocols._few_shot import FEW_SHOT_CODE
from dssl.evaluation.configs import FewShotConfig

SPEC = ProtocolSpec("linear_probe_1pct", FewShotConfig, FEW_SHOT_CODE, {"label_fraction": 0.01})

"""What the few-shot probes share: one function implements both, told apart by the ``label_fraction`` each name
fixes (paper B, https://arxiv.org/abs/2204.04385: 1 % and 10 % of the labels)."""

from __future__ import annotations

FEW_SHOT_CODE = "evaluation.few_shot:evaluate"

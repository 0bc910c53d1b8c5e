"""Evaluation of pretrained encoders: linear probe and full fine-tuning (registry ``PROTOCOLS``).

Each protocol is ``evaluate(encoder, train, test, config, seed) -> dict`` with at least ``test_acc``,
``val_acc``, the chosen hyper-parameters and ``epochs``; hyper-parameters are chosen on a validation
split of the training set, never on the test set (see ``common``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from torch import nn

from dssl.evaluation import finetune, linear_probe
from dssl.evaluation.common import LabelledImages, stratified_split
from dssl.evaluation.finetune import FineTuneConfig
from dssl.evaluation.linear_probe import LinearProbeConfig

PROTOCOLS: dict[str, Callable[..., dict[str, Any]]] = {
    "linear_probe": linear_probe.evaluate,
    "finetune": finetune.evaluate,
}


def evaluate(protocol: str, encoder: nn.Module, train: LabelledImages, test: LabelledImages,
             config: Mapping[str, Any] | None = None, seed: int = 0) -> dict[str, Any]:
    """Run evaluation protocol ``protocol`` (a ``PROTOCOLS`` key); ``encoder`` is left unchanged."""
    if protocol not in PROTOCOLS:
        raise KeyError(f"unknown evaluation protocol {protocol!r}; known: {', '.join(sorted(PROTOCOLS))}")
    return PROTOCOLS[protocol](encoder, train, test, config, seed)


__all__ = ["PROTOCOLS", "FineTuneConfig", "LinearProbeConfig", "evaluate", "stratified_split"]

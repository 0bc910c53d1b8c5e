"""Evaluation of pretrained encoders (registry ``PROTOCOLS``): linear probe, full fine-tuning, weighted
kNN and few-shot linear probes on 1 % / 10 % of the labels.

Each protocol is ``evaluate(encoder, train, test, config, seed) -> dict`` with at least ``test_acc``,
``val_acc``, the chosen hyper-parameters and ``epochs``; hyper-parameters are chosen on a validation
split of the training set, never on the test set (see ``common``). ``PROTOCOLS[name].keys`` are the
config keys a params file may set. Importing this package does not import torch (``registry``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dssl.evaluation.configs import FewShotConfig, FineTuneConfig, KnnConfig, LinearProbeConfig
from dssl.evaluation.registry import PROTOCOLS, Protocol
from dssl.evaluation.splits import labelled_subset, stratified_split

if TYPE_CHECKING:
    from torch import nn

    from dssl.evaluation.common import LabelledImages
    from dssl.evaluation.progress import Checkpoint


def evaluate(protocol: str, encoder: nn.Module, train: LabelledImages, test: LabelledImages,
             config: Any = None, seed: int = 0, checkpoint: Checkpoint | None = None) -> dict[str, Any]:
    """Run evaluation protocol ``protocol`` (a ``PROTOCOLS`` key); ``encoder`` is left unchanged.

    ``checkpoint``: where the training protocols (fine-tuning, the linear probes) save their progress
    and resume from, so a killed or preempted evaluation ends with the bits of an uninterrupted one."""
    if protocol not in PROTOCOLS:
        raise KeyError(f"unknown evaluation protocol {protocol!r}; known: {', '.join(sorted(PROTOCOLS))}")
    return PROTOCOLS[protocol](encoder, train, test, config, seed, checkpoint)


__all__ = ["PROTOCOLS", "FewShotConfig", "FineTuneConfig", "KnnConfig", "LinearProbeConfig", "Protocol",
           "evaluate", "labelled_subset", "stratified_split"]

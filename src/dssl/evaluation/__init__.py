"""Evaluation of pretrained encoders: linear probe, full fine-tuning, weighted kNN and few-shot linear probes
on 1 % / 10 % of the labels.

Each protocol is declared once, torch-free, by its spec module ``dssl.config.protocols.<name>`` (registry
``PROTOCOL_SPECS``: its config dataclass, the values its name fixes, and the function here implementing it);
``PROTOCOL_SPECS[name].keys`` are the config keys a params file may set. Each implementation is ``evaluate(encoder,
train, test, config, seed, checkpoint) -> dict`` with at least ``test_acc``, ``val_acc``, the chosen
hyper-parameters and ``epochs``; hyper-parameters are chosen on a validation split of the training set, never on
the test set (see ``common``). Importing this package does not import torch: a protocol's module is imported when
it first runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dssl.config.protocols import PROTOCOL_SPECS
from dssl.evaluation.configs import FewShotConfig, FineTuneConfig, KnnConfig, LinearProbeConfig
from dssl.evaluation.splits import labelled_subset, stratified_split

if TYPE_CHECKING:
    from torch import nn

    from dssl.evaluation.common import LabelledImages
    from dssl.evaluation.progress import Checkpoint


def evaluate(protocol: str, encoder: nn.Module, train: LabelledImages, test: LabelledImages,
             config: Any = None, seed: int = 0, checkpoint: Checkpoint | None = None) -> dict[str, Any]:
    """Run evaluation protocol ``protocol`` (a ``PROTOCOL_SPECS`` key); ``encoder`` is left unchanged.

    ``checkpoint``: where the training protocols (fine-tuning, the linear probes) save their progress
    and resume from, so a killed or preempted evaluation ends with the bits of an uninterrupted one."""
    if protocol not in PROTOCOL_SPECS:
        raise KeyError(f"unknown evaluation protocol {protocol!r}; known: {', '.join(PROTOCOL_SPECS.names())}")
    return PROTOCOL_SPECS[protocol](encoder, train, test, config, seed, checkpoint)


__all__ = ["FewShotConfig", "FineTuneConfig", "KnnConfig", "LinearProbeConfig", "evaluate", "labelled_subset",
           "stratified_split"]

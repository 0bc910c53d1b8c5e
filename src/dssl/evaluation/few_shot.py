"""Few-shot linear probe: paper B's semi-supervised evaluation with 1 % / 10 % of the labels.

Paper B trains a linear head on frozen features using a class-balanced 1 % or 10 % of the training
labels (Adam lr 1e-3, 100 epochs) and its code reports the best *test* epoch. Here, as in every
protocol, the validation split is carved from the training split first; the labelled subset
(``splits.labelled_subset``) is then drawn from the rest, so the two are disjoint, and the head, its
learning rate, weight decay and epoch are chosen on the validation split; the test split is scored once.

Caveat, reported with the result (``num_val``): the validation split is labelled, and at 1 % it holds
more labels than the training subset -- as in most semi-supervised benchmarks (Oliver et al., "Realistic
Evaluation of Deep Semi-Supervised Learning Algorithms", NeurIPS 2018), it is used for selection only.
Feature standardisation uses the whole unlabelled pool (statistics need no labels).
"""

from __future__ import annotations

from typing import Any, Mapping

from torch import nn

from dssl.evaluation.common import LabelledImages
from dssl.evaluation.configs import FewShotConfig, coerce_config
from dssl.evaluation.linear_probe import probe
from dssl.evaluation.progress import Checkpoint
from dssl.evaluation.splits import labelled_subset, stratified_split


def evaluate(encoder: nn.Module, train: LabelledImages, test: LabelledImages,
             config: FewShotConfig | Mapping[str, Any] | None = None, seed: int = 0,
             checkpoint: Checkpoint | None = None) -> dict[str, Any]:
    """Few-shot linear-probe accuracy of ``encoder`` (left unchanged); ``num_fit`` is the labelled count."""
    cfg = coerce_config(FewShotConfig, config)
    pool_idx, val_idx = stratified_split(train.labels, cfg.val_fraction, seed)
    labelled_idx = labelled_subset(train.labels, pool_idx, cfg.label_fraction, seed)
    result = probe(encoder, train, test, cfg, labelled_idx, val_idx, pool_idx, seed, checkpoint)
    return {"protocol": "few_shot_linear_probe", **result, "label_fraction": cfg.label_fraction,
            "num_pool": len(pool_idx)}

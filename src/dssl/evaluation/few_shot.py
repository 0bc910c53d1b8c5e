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

import numpy as np
from torch import nn

from dssl.config.protocols import coerce_config
from dssl.evaluation.common import LabelledImages
from dssl.evaluation.configs import FewShotConfig
from dssl.evaluation.linear_probe import frozen_features, probe_features
from dssl.evaluation.progress import Checkpoint
from dssl.evaluation.splits import labelled_subset, stratified_split

DRAW_FIELDS = ("seed", "test_acc", "val_acc", "lr", "weight_decay", "epochs")   # kept per draw


def draw_seed(seed: int, draw: int) -> int:
    """The seed of label draw ``draw``: the evaluation seed itself for draw 0, else one derived from both."""
    return seed if draw == 0 else int(np.random.SeedSequence([seed, draw]).generate_state(1)[0])


def _draw_checkpoint(checkpoint: Checkpoint | None, draw: int) -> Checkpoint | None:
    """Where draw ``draw`` keeps its progress: the task's own checkpoint for draw 0, a sub-folder for the others."""
    if checkpoint is None or draw == 0:
        return checkpoint
    return checkpoint.child(f"draw-{draw}")


def evaluate(encoder: nn.Module, train: LabelledImages, test: LabelledImages,
             config: FewShotConfig | Mapping[str, Any] | None = None, seed: int = 0,
             checkpoint: Checkpoint | None = None) -> dict[str, Any]:
    """Few-shot linear-probe accuracy of ``encoder`` (left unchanged); ``num_fit`` is the labelled count.

    With ``draws`` > 1 the features are extracted once and the probe is trained on each draw of the
    validation split and labelled subset (each draw with its own checkpoint); ``test_acc`` and
    ``val_acc`` are the means over draws, the other fields draw 0's, and ``draws`` lists every draw."""
    cfg = coerce_config(FewShotConfig, config)
    features, test_features = frozen_features(encoder, train, test, cfg)
    results = []
    for draw in range(cfg.draws):
        s = draw_seed(seed, draw)
        pool_idx, val_idx = stratified_split(train.labels, cfg.val_fraction, s)
        labelled_idx = labelled_subset(train.labels, pool_idx, cfg.label_fraction, s)
        result = probe_features(features, test_features, train, test, cfg, labelled_idx, val_idx, pool_idx, s,
                                _draw_checkpoint(checkpoint, draw))
        results.append({**result, "num_pool": len(pool_idx)})
    for draw in range(1, cfg.draws if checkpoint is not None else 0):   # the caller removes draw 0's
        finished = _draw_checkpoint(checkpoint, draw)
        finished.remove()
        if finished.folder.is_dir() and not any(finished.folder.iterdir()):
            finished.folder.rmdir()
    first = {**results[0], "seed": seed}
    if cfg.draws > 1:
        first |= {"test_acc": float(np.mean([r["test_acc"] for r in results])),
                  "val_acc": float(np.mean([r["val_acc"] for r in results])),
                  "draws": [{key: r[key] for key in DRAW_FIELDS} for r in results]}
    return {"protocol": "few_shot_linear_probe", **first, "label_fraction": cfg.label_fraction,
            "num_draws": cfg.draws}

"""Weighted k-nearest-neighbour classifier on frozen features: no training, so no optimiser to tune.

The standard kNN monitor of self-supervised learning (Wu et al., "Unsupervised Feature Learning via
Non-Parametric Instance Discrimination", CVPR 2018; the implementation used by DINO, Caron et al.,
ICCV 2021, ``eval_knn.py``): features are L2-normalised, a query's k most cosine-similar training
samples vote for their labels with weight exp(sim / T), and the class with the largest total weight
wins (k = 20, T = 0.07 by default). Being free of optimisation noise it is a cheap, sensitive
complement to the linear probe.

``val_acc``: the kNN with the fit part of the training split as its memory bank, scored on the
validation split (nothing is selected on it; it is reported for comparison with the other
protocols). ``test_acc``: the full training split as the bank -- kNN has no parameters fitted on
it, so using every training label is the usual protocol -- scored once on the test split.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.protocols import coerce_config
from dssl.evaluation.common import LabelledImages, extract_features, label_tensor, module_device
from dssl.evaluation.configs import KnnConfig
from dssl.evaluation.splits import stratified_split


def evaluate(encoder: nn.Module, train: LabelledImages, test: LabelledImages,
             config: KnnConfig | Mapping[str, Any] | None = None, seed: int = 0,
             checkpoint: object = None) -> dict[str, Any]:
    """kNN accuracy of ``encoder`` (left unchanged) on validation (fit bank) and test (full bank).
    Nothing is trained, so there is nothing to checkpoint (``checkpoint`` is ignored)."""
    cfg = coerce_config(KnnConfig, config)
    fit_idx, val_idx = stratified_split(train.labels, cfg.val_fraction, seed)
    device = module_device(encoder)
    options = cfg.step_options
    bank = F.normalize(extract_features(encoder, train, np.arange(len(train)), cfg.feature_batch_size, options), dim=1)
    queries = F.normalize(extract_features(encoder, test, np.arange(len(test)), cfg.feature_batch_size, options), dim=1)
    labels = label_tensor(train, np.arange(len(train)), device)
    test_labels = label_tensor(test, np.arange(len(test)), device)
    val_pred = knn_predict(bank[fit_idx], labels[fit_idx], bank[val_idx], train.num_classes, cfg)
    test_pred = knn_predict(bank, labels, queries, train.num_classes, cfg)
    return {
        "protocol": "knn", "test_acc": _accuracy(test_pred, test_labels),
        "val_acc": _accuracy(val_pred, labels[val_idx]), "k": cfg.k, "temperature": cfg.temperature, "epochs": 0,
        "num_fit": len(fit_idx), "num_val": len(val_idx), "num_test": len(test), "num_bank": len(train), "seed": seed,
    }


@torch.no_grad()
def knn_predict(bank: torch.Tensor, bank_labels: torch.Tensor, queries: torch.Tensor, num_classes: int,
                cfg: KnnConfig) -> torch.Tensor:
    """Predicted labels of L2-normalised ``queries`` by temperature-weighted votes of their k neighbours.

    score_c(q) = sum over the k most similar bank samples i with label c of exp(<q, b_i> / T);
    ties go to the lower class index (``argmax`` keeps the first maximum), so the result is deterministic.
    """
    k = min(cfg.k, len(bank))
    predictions = []
    for chunk in queries.split(cfg.query_batch_size):  # bounds the [chunk, bank] similarity matrix
        sims, neighbours = (chunk @ bank.T).topk(k, dim=1)
        votes = torch.zeros(len(chunk), num_classes, device=chunk.device, dtype=sims.dtype)
        votes.scatter_add_(1, bank_labels[neighbours], (sims / cfg.temperature).exp())
        predictions.append(votes.argmax(dim=1))
    return torch.cat(predictions)


def _accuracy(predictions: torch.Tensor, labels: torch.Tensor) -> float:
    return float((predictions == labels).float().mean())

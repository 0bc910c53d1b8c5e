"""Linear probe: a linear classifier on frozen encoder features.

Paper B's linear evaluation (frozen 512-d features, a linear head, Adam lr 3e-3, 200 epochs); paper A
fine-tunes instead (``finetune``). Features are extracted once without augmentation and standardised
with the fit part's mean and std (what a non-affine BatchNorm in front of the head, as in MAE's linear
probe, does at eval time); the head starts at zero (the problem is convex) and trains with mini-batch
Adam. The learning rate, weight decay and epoch are chosen by validation accuracy (see ``common``).
``probe`` is the part shared with the few-shot probe (``few_shot``), which trains on a labelled subset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dssl.evaluation.common import LabelledImages, accuracy, extract_features, label_tensor, module_device
from dssl.evaluation.configs import LinearProbeConfig, coerce_config
from dssl.evaluation.splits import stratified_split

Split = tuple[torch.Tensor, torch.Tensor]  # (standardised features, labels)


@dataclass
class _Candidate:
    lr: float
    weight_decay: float
    epoch: int
    val_acc: float
    head: nn.Linear


def evaluate(encoder: nn.Module, train: LabelledImages, test: LabelledImages,
             config: LinearProbeConfig | Mapping[str, Any] | None = None, seed: int = 0) -> dict[str, Any]:
    """Linear-probe accuracy of ``encoder`` (left unchanged): test accuracy of the val-selected head."""
    cfg = coerce_config(LinearProbeConfig, config)
    fit_idx, val_idx = stratified_split(train.labels, cfg.val_fraction, seed)
    return {"protocol": "linear_probe", **probe(encoder, train, test, cfg, fit_idx, val_idx, fit_idx, seed)}


def probe(encoder: nn.Module, train: LabelledImages, test: LabelledImages, cfg: LinearProbeConfig,
          fit_idx: np.ndarray, val_idx: np.ndarray, stats_idx: np.ndarray, seed: int) -> dict[str, Any]:
    """Train heads on ``fit_idx`` over the lr x weight-decay grid, select on ``val_idx``, score the test once.

    Features are standardised with the mean and std of ``stats_idx`` (no labels needed, so a
    semi-supervised probe may use its unlabelled pool). Returns the result fields shared by the probes.
    """
    device = module_device(encoder)
    features = extract_features(encoder, train, np.arange(len(train)), cfg.feature_batch_size)
    test_features = extract_features(encoder, test, np.arange(len(test)), cfg.feature_batch_size)
    mean, std = features[stats_idx].mean(dim=0), features[stats_idx].std(dim=0).clamp_min(1e-6)
    fit = ((features[fit_idx] - mean) / std, label_tensor(train, fit_idx, device))
    val = ((features[val_idx] - mean) / std, label_tensor(train, val_idx, device))
    best, grid = _select_head(fit, val, train.num_classes, cfg, seed)
    with torch.no_grad():
        test_acc = accuracy(best.head((test_features - mean) / std), label_tensor(test, np.arange(len(test)), device))
    return {
        "test_acc": test_acc, "val_acc": best.val_acc,
        "lr": best.lr, "weight_decay": best.weight_decay, "epochs": best.epoch, "max_epochs": cfg.epochs,
        "num_fit": len(fit_idx), "num_val": len(val_idx), "num_test": len(test), "seed": seed, "grid": grid,
    }


def _select_head(fit: Split, val: Split, num_classes: int, cfg: LinearProbeConfig,
                 seed: int) -> tuple[_Candidate, list[dict[str, Any]]]:
    """The best head over the grid by validation accuracy (ties: the first in grid order), and the grid."""
    grid, best = [], None
    for lr in cfg.lr_grid:
        for weight_decay in cfg.weight_decay_grid:
            candidate = _train_head(fit, val, num_classes, lr, weight_decay, cfg, seed)
            grid.append({"lr": lr, "weight_decay": weight_decay, "epoch": candidate.epoch,
                         "val_acc": candidate.val_acc})
            if best is None or candidate.val_acc > best.val_acc:
                best = candidate
    return best, grid


def _train_head(fit: Split, val: Split, num_classes: int, lr: float, weight_decay: float,
                cfg: LinearProbeConfig, seed: int) -> _Candidate:
    """Train one head; keep the weights of its best validation epoch (ties: the earliest)."""
    x, y = fit
    head = nn.Linear(x.shape[1], num_classes).to(x.device)
    nn.init.zeros_(head.weight)
    nn.init.zeros_(head.bias)
    optimizer = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    best = _Candidate(lr, weight_decay, 0, -1.0, head)
    for epoch in range(1, cfg.epochs + 1):
        for batch in torch.randperm(len(x), generator=generator).to(x.device).split(cfg.batch_size):
            loss = F.cross_entropy(head(x[batch]), y[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if epoch % cfg.eval_every == 0 or epoch == cfg.epochs:
            with torch.no_grad():
                val_acc = accuracy(head(val[0]), val[1])
            if val_acc > best.val_acc:
                snapshot = nn.Linear(x.shape[1], num_classes).to(x.device)
                snapshot.load_state_dict(head.state_dict())
                best = _Candidate(lr, weight_decay, epoch, val_acc, snapshot)
    return best

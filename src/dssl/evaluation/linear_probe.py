"""Linear probe: a linear classifier on frozen encoder features.

Paper B's linear evaluation (frozen 512-d features, a linear head, Adam lr 3e-3, 200 epochs); paper A
fine-tunes instead (``finetune``). Features are extracted once without augmentation and standardised
with the fit part's mean and std (what a non-affine BatchNorm in front of the head, as in MAE's linear
probe, does at eval time); the head starts at zero (the problem is convex) and trains with mini-batch
Adam. The learning rate, weight decay and epoch are chosen by validation accuracy (see ``common``).
``probe`` is the part shared with the few-shot probe (``few_shot``), which trains on a labelled subset.
Features are extracted under the protocol's step options (bf16, channels-last, compile); the head
trains in fp32. The heads' training checkpoints and resumes (``progress``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dssl.evaluation.common import LabelledImages, accuracy, extract_features, label_tensor
from dssl.evaluation.configs import LinearProbeConfig, coerce_config
from dssl.evaluation.progress import Checkpoint, cpu_state, save_point
from dssl.evaluation.splits import stratified_split

Split = tuple[torch.Tensor, torch.Tensor]  # (standardised features, labels)


@dataclass
class _Candidate:
    lr: float
    weight_decay: float
    epoch: int
    val_acc: float
    head: nn.Linear

    def saved(self) -> dict[str, Any]:
        return {"lr": self.lr, "weight_decay": self.weight_decay, "epoch": self.epoch, "val_acc": self.val_acc,
                "head": cpu_state(self.head.state_dict())}


def evaluate(encoder: nn.Module, train: LabelledImages, test: LabelledImages,
             config: LinearProbeConfig | Mapping[str, Any] | None = None, seed: int = 0,
             checkpoint: Checkpoint | None = None) -> dict[str, Any]:
    """Linear-probe accuracy of ``encoder`` (left unchanged): test accuracy of the val-selected head."""
    cfg = coerce_config(LinearProbeConfig, config)
    fit_idx, val_idx = stratified_split(train.labels, cfg.val_fraction, seed)
    return {"protocol": "linear_probe",
            **probe(encoder, train, test, cfg, fit_idx, val_idx, fit_idx, seed, checkpoint)}


def probe(encoder: nn.Module, train: LabelledImages, test: LabelledImages, cfg: LinearProbeConfig,
          fit_idx: np.ndarray, val_idx: np.ndarray, stats_idx: np.ndarray, seed: int,
          checkpoint: Checkpoint | None = None) -> dict[str, Any]:
    """Train heads on ``fit_idx`` over the lr x weight-decay grid, select on ``val_idx``, score the test once.

    Features are standardised with the mean and std of ``stats_idx`` (no labels needed, so a
    semi-supervised probe may use its unlabelled pool). Returns the result fields shared by the probes.
    The features are extracted again on a resumed run (the same bits: the encoder is frozen); the
    heads' training resumes from ``checkpoint``.
    """
    features, test_features = frozen_features(encoder, train, test, cfg)
    return probe_features(features, test_features, train, test, cfg, fit_idx, val_idx, stats_idx, seed, checkpoint)


def frozen_features(encoder: nn.Module, train: LabelledImages, test: LabelledImages,
                    cfg: LinearProbeConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The encoder's features of every training and test image, under the protocol's step options."""
    features = extract_features(encoder, train, np.arange(len(train)), cfg.feature_batch_size, cfg.step_options)
    test_features = extract_features(encoder, test, np.arange(len(test)), cfg.feature_batch_size, cfg.step_options)
    return features, test_features


def probe_features(features: torch.Tensor, test_features: torch.Tensor, train: LabelledImages,
                   test: LabelledImages, cfg: LinearProbeConfig, fit_idx: np.ndarray, val_idx: np.ndarray,
                   stats_idx: np.ndarray, seed: int, checkpoint: Checkpoint | None = None) -> dict[str, Any]:
    """``probe`` on features already extracted (``frozen_features``): a few-shot probe's label draws share them."""
    device = features.device
    mean, std = features[stats_idx].mean(dim=0), features[stats_idx].std(dim=0).clamp_min(1e-6)
    fit = ((features[fit_idx] - mean) / std, label_tensor(train, fit_idx, device))
    val = ((features[val_idx] - mean) / std, label_tensor(train, val_idx, device))
    best, grid = HeadGrid(fit, val, train.num_classes, cfg, seed, checkpoint).select()
    with torch.no_grad():
        test_acc = accuracy(best.head((test_features - mean) / std), label_tensor(test, np.arange(len(test)), device))
    return {
        "test_acc": test_acc, "val_acc": best.val_acc,
        "lr": best.lr, "weight_decay": best.weight_decay, "epochs": best.epoch, "max_epochs": cfg.epochs,
        "num_fit": len(fit_idx), "num_val": len(val_idx), "num_test": len(test), "seed": seed, "grid": grid,
    }


class HeadGrid:
    """Heads trained over the lr x weight-decay grid, one after another, checkpointed at every safe
    point (``progress``): after each epoch, and after any step once a stop is requested."""

    def __init__(self, fit: Split, val: Split, num_classes: int, cfg: LinearProbeConfig, seed: int,
                 checkpoint: Checkpoint | None = None):
        self.fit, self.val, self.num_classes, self.cfg, self.seed = fit, val, num_classes, cfg, seed
        self.checkpoint = checkpoint
        self.points = [(lr, wd) for lr in cfg.lr_grid for wd in cfg.weight_decay_grid]

    def select(self) -> tuple[_Candidate, list[dict[str, Any]]]:
        """The best head over the grid by validation accuracy (ties: the first in grid order), and the grid."""
        saved = self.checkpoint.load() if self.checkpoint is not None else None
        grid, best = ([], None) if saved is None else (saved["grid"], self._restored(saved["best"]))
        first = 0 if saved is None else saved["point"]
        for index in range(first, len(self.points)):
            candidate = self._train_head(index, grid, best, saved if index == first else None)
            grid.append({"lr": candidate.lr, "weight_decay": candidate.weight_decay, "epoch": candidate.epoch,
                         "val_acc": candidate.val_acc})
            if best is None or candidate.val_acc > best.val_acc:
                best = candidate
        return best, grid

    def _new_head(self) -> nn.Linear:
        head = nn.Linear(self.fit[0].shape[1], self.num_classes).to(self.fit[0].device)
        nn.init.zeros_(head.weight)
        nn.init.zeros_(head.bias)
        return head

    def _restored(self, saved: dict[str, Any] | None) -> _Candidate | None:
        if saved is None:
            return None
        head = self._new_head()
        head.load_state_dict(saved["head"])
        return _Candidate(saved["lr"], saved["weight_decay"], saved["epoch"], saved["val_acc"], head)

    def _train_head(self, index: int, grid: list, best: _Candidate | None, saved: dict | None) -> _Candidate:
        """Train grid point ``index``'s head; keep the weights of its best validation epoch (ties: the earliest)."""
        (x, y), cfg = self.fit, self.cfg
        lr, weight_decay = self.points[index]
        head = self._new_head()
        optimizer = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=weight_decay)
        generator = torch.Generator().manual_seed(self.seed)
        current, epochs_done, position, perm = _Candidate(lr, weight_decay, 0, -1.0, head), 0, 0, None
        if saved is not None:
            head.load_state_dict(saved["head"])
            optimizer.load_state_dict(saved["optimizer"])
            generator.set_state(saved["generator"])
            epochs_done, position = saved["epoch"], saved["step"]
            perm = None if saved["perm"] is None else saved["perm"].to(x.device)
            if saved["current"] is not None:
                current = self._restored(saved["current"])

        def state(epoch: int, step: int, epoch_perm: torch.Tensor | None) -> dict[str, Any]:
            kept = None if current.head is head else current.saved()
            return {"point": index, "grid": list(grid), "best": best.saved() if best else None, "current": kept,
                    "epoch": epoch, "step": step, "perm": None if epoch_perm is None else epoch_perm.cpu(),
                    "head": cpu_state(head.state_dict()), "optimizer": optimizer.state_dict(),
                    "generator": generator.get_state()}

        for epoch in range(epochs_done + 1, cfg.epochs + 1):
            if perm is None:
                perm = torch.randperm(len(x), generator=generator).to(x.device, non_blocking=True)
            for number, batch in enumerate(perm.split(cfg.batch_size)[position:], position):
                loss = F.cross_entropy(head(x[batch]), y[batch])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                save_point(self.checkpoint, lambda: state(epoch - 1, number + 1, perm), False,
                           f"at step {number + 1} of epoch {epoch} (lr {lr}, weight decay {weight_decay})")
            position, perm = 0, None
            if epoch % cfg.eval_every == 0 or epoch == cfg.epochs:
                with torch.no_grad():
                    val_acc = accuracy(head(self.val[0]), self.val[1])
                if val_acc > current.val_acc:
                    snapshot = self._new_head()
                    snapshot.load_state_dict(head.state_dict())
                    current = _Candidate(lr, weight_decay, epoch, val_acc, snapshot)
            save_point(self.checkpoint, lambda: state(epoch, 0, None), True,
                       f"after epoch {epoch} (lr {lr}, weight decay {weight_decay})")
        return current

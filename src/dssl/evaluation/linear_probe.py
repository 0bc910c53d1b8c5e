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

from dssl.config.protocols import coerce_config
from dssl.evaluation.common import LabelledImages, accuracy, extract_features, label_tensor
from dssl.evaluation.configs import LinearProbeConfig
from dssl.evaluation.progress import Checkpoint, save_point
from dssl.evaluation.splits import stratified_split

Split = tuple[torch.Tensor, torch.Tensor]  # (standardised features, labels)


@dataclass
class _Candidate:
    """One grid point's head at its best validation epoch so far (ties: the earliest)."""

    lr: float
    weight_decay: float
    epoch: int
    val_acc: float
    head: nn.Linear


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


ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8   # torch.optim.Adam's defaults
# What a probe checkpoint holds: the stacked heads' state. A checkpoint of the same inputs written by the
# heads-one-after-another code that preceded it has none of it, so that run starts its heads again.
STATE_LAYOUT = "stacked-heads"


class HeadGrid:
    """Every head of the lr x weight-decay grid trained at once, checkpointed at every safe point
    (``progress``): after each epoch, and after any step once a stop is requested.

    The heads are independent problems that see the same mini-batches (one shuffling generator seeded
    with the probe's seed), so they are stacked: one [H, C, D] weight tensor, the softmax cross-entropy
    gradient written out (the problem is a linear model), and Adam with L2 weight decay (torch's
    ``Adam(weight_decay=...)``, defaults betas and eps) applied with per-head lr and weight decay. One
    step updates every grid point: the 100-epoch probe of the embedded default runs a quarter of the
    tiny steps that four separately trained heads would, each dominated by per-op overhead.
    """

    def __init__(self, fit: Split, val: Split, num_classes: int, cfg: LinearProbeConfig, seed: int,
                 checkpoint: Checkpoint | None = None):
        self.fit, self.val, self.num_classes, self.cfg, self.seed = fit, val, num_classes, cfg, seed
        self.checkpoint = checkpoint
        self.points = [(lr, wd) for lr in cfg.lr_grid for wd in cfg.weight_decay_grid]

    def select(self) -> tuple[_Candidate, list[dict[str, Any]]]:
        """The best head over the grid by validation accuracy (ties: the first in grid order), and the grid."""
        candidates = self._train()
        grid = [{"lr": c.lr, "weight_decay": c.weight_decay, "epoch": c.epoch, "val_acc": c.val_acc}
                for c in candidates]
        best = candidates[0]
        for candidate in candidates[1:]:
            if candidate.val_acc > best.val_acc:
                best = candidate
        return best, grid

    def _head(self, weight: torch.Tensor, bias: torch.Tensor) -> nn.Linear:
        head = nn.Linear(weight.shape[1], weight.shape[0]).to(weight.device)
        with torch.no_grad():
            head.weight.copy_(weight)
            head.bias.copy_(bias)
        return head

    def _train(self) -> list[_Candidate]:
        (x, y), cfg = self.fit, self.cfg
        device, heads, dim = x.device, len(self.points), x.shape[1]
        lr = torch.tensor([p[0] for p in self.points], device=device).view(heads, 1, 1)
        decay = torch.tensor([p[1] for p in self.points], device=device).view(heads, 1, 1)
        # params[:, :, :dim] is each head's weight, params[:, :, dim] its bias: one tensor, one update
        params = torch.zeros(heads, self.num_classes, dim + 1, device=device)
        exp_avg, exp_avg_sq = torch.zeros_like(params), torch.zeros_like(params)
        generator = torch.Generator().manual_seed(self.seed)
        best_epoch, best_acc = [0] * heads, [-1.0] * heads
        best_params = params.clone()
        epochs_done, position, perm, steps = 0, 0, None, 0
        saved = self.checkpoint.load() if self.checkpoint is not None else None
        if saved is not None and saved.get("layout") != STATE_LAYOUT:
            saved = None
        if saved is not None:
            params, exp_avg, exp_avg_sq = (saved[k].to(device) for k in ("params", "exp_avg", "exp_avg_sq"))
            best_params = saved["best_params"].to(device)
            best_epoch, best_acc, steps = list(saved["best_epoch"]), list(saved["best_acc"]), saved["adam_steps"]
            generator.set_state(saved["generator"])
            epochs_done, position = saved["epoch"], saved["step"]
            perm = None if saved["perm"] is None else saved["perm"].to(device)
        # the bias is the weight of a constant feature 1; torch's Adam(weight_decay) decays every parameter
        # it is given, the bias too, and so does this
        x1 = torch.cat([x, torch.ones(len(x), 1, device=device)], dim=1)
        val1 = torch.cat([self.val[0], torch.ones(len(self.val[0]), 1, device=device)], dim=1)
        onehot = F.one_hot(y, self.num_classes).to(x.dtype)
        (beta1, beta2), where = ADAM_BETAS, "lr x weight-decay grid of the linear heads"

        def state(epoch: int, step: int, epoch_perm: torch.Tensor | None) -> dict[str, Any]:
            return {"layout": STATE_LAYOUT, "params": params.cpu().clone(), "exp_avg": exp_avg.cpu().clone(),
                    "exp_avg_sq": exp_avg_sq.cpu().clone(), "best_params": best_params.cpu().clone(),
                    "best_epoch": list(best_epoch), "best_acc": list(best_acc), "adam_steps": steps,
                    "epoch": epoch, "step": step, "perm": None if epoch_perm is None else epoch_perm.cpu(),
                    "generator": generator.get_state()}

        for epoch in range(epochs_done + 1, cfg.epochs + 1):
            if perm is None:
                perm = torch.randperm(len(x), generator=generator).to(device, non_blocking=True)
            for number, batch in enumerate(perm.split(cfg.batch_size)[position:], position):
                inputs = x1[batch]
                # d(mean cross-entropy)/d(logits) = (softmax - onehot) / batch, per head
                probs = torch.softmax(torch.einsum("bd,hcd->hbc", inputs, params), dim=2)
                grad = torch.einsum("hbc,bd->hcd", (probs - onehot[batch]) / len(batch), inputs)
                grad = grad + decay * params
                steps += 1
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = (exp_avg_sq.sqrt() / (1 - beta2 ** steps) ** 0.5).add_(ADAM_EPS)
                params = params - (lr / (1 - beta1 ** steps)) * exp_avg / denom
                save_point(self.checkpoint, lambda: state(epoch - 1, number + 1, perm), False,
                           f"at step {number + 1} of epoch {epoch} ({where})")
            position, perm = 0, None
            if epoch % cfg.eval_every == 0 or epoch == cfg.epochs:
                hits = torch.einsum("bd,hcd->hbc", val1, params).argmax(dim=2) == self.val[1]
                for h, val_acc in enumerate(hits.float().mean(dim=1).tolist()):
                    if val_acc > best_acc[h]:
                        best_epoch[h], best_acc[h] = epoch, val_acc
                        best_params[h] = params[h]
            save_point(self.checkpoint, lambda: state(epoch, 0, None), True, f"after epoch {epoch} ({where})")
        return [_Candidate(lr_h, wd_h, best_epoch[h], best_acc[h],
                           self._head(best_params[h, :, :dim], best_params[h, :, dim]))
                for h, (lr_h, wd_h) in enumerate(self.points)]

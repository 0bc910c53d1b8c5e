"""Full fine-tuning: encoder + linear head trained end to end with light augmentation.

Paper A's protocol (it reports fine-tuning, not linear probing). Paper A's CNN recipe is SGD/AdamW with
a cosine schedule; its ViT recipe adds MAE's layer decay, mixup/cutmix and RandAugment, which this
small-scale protocol leaves out (see the report). Each learning rate of the grid fine-tunes a fresh copy
of the pretrained encoder; the learning rate and epoch are chosen by validation accuracy, and the
selected model is scored once on the test split (see ``common``).

Augmentation: a random translation by up to ``crop_padding`` pixels (zero padding then a random crop,
the CIFAR recipe) and, when ``hflip`` is set, a horizontal flip -- off by default, since a mirrored digit
is another symbol.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dssl.evaluation.common import LabelledImages, label_tensor, load_images, module_device
from dssl.evaluation.configs import FineTuneConfig, coerce_config
from dssl.evaluation.splits import stratified_split


class Classifier(nn.Module):
    """The fine-tuned model: encoder features -> linear head."""

    def __init__(self, encoder: nn.Module, num_classes: int):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.feature_dim, num_classes)
        # Zero start (MAE's fine-tuning head starts at std 2e-5): deterministic, no global RNG draw.
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


@dataclass
class _Candidate:
    lr: float
    epoch: int
    val_acc: float
    state: dict[str, torch.Tensor]


def evaluate(encoder: nn.Module, train: LabelledImages, test: LabelledImages,
             config: FineTuneConfig | Mapping[str, Any] | None = None, seed: int = 0) -> dict[str, Any]:
    """Fine-tuning accuracy of ``encoder`` (left unchanged): test accuracy of the val-selected model."""
    cfg = coerce_config(FineTuneConfig, config)  # checks the optimizer name
    fit_idx, val_idx = stratified_split(train.labels, cfg.val_fraction, seed)
    model = Classifier(copy.deepcopy(encoder), train.num_classes).to(module_device(encoder))
    initial = copy.deepcopy(model.state_dict())
    grid, best = [], None
    for lr in cfg.lr_grid:
        model.load_state_dict(initial)
        candidate = _fine_tune(model, train, fit_idx, val_idx, lr, cfg, seed)
        grid.append({"lr": lr, "epoch": candidate.epoch, "val_acc": candidate.val_acc})
        if best is None or candidate.val_acc > best.val_acc:
            best = candidate
    model.load_state_dict(best.state)
    test_acc = _accuracy_on(model, test, np.arange(len(test)), cfg.batch_size)
    return {
        "protocol": "finetune", "test_acc": test_acc, "val_acc": best.val_acc, "lr": best.lr,
        "weight_decay": cfg.weight_decay, "optimizer": cfg.optimizer, "epochs": best.epoch, "max_epochs": cfg.epochs,
        "num_fit": len(fit_idx), "num_val": len(val_idx), "num_test": len(test), "seed": seed, "grid": grid,
    }


def _fine_tune(model: Classifier, train: LabelledImages, fit_idx: np.ndarray, val_idx: np.ndarray,
               lr: float, cfg: FineTuneConfig, seed: int) -> _Candidate:
    """Train from the loaded state; keep the best validation epoch (ties: the earliest)."""
    device = module_device(model)
    optimizer = _optimizer(model, lr, cfg)
    steps_per_epoch = math.ceil(len(fit_idx) / cfg.batch_size)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: _lr_factor(step, steps_per_epoch * cfg.warmup_epochs, steps_per_epoch * cfg.epochs))
    generator = torch.Generator().manual_seed(seed)
    best = _Candidate(lr, 0, -1.0, {})
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        order = fit_idx[torch.randperm(len(fit_idx), generator=generator).numpy()]
        for start in range(0, len(order), cfg.batch_size):
            batch = order[start:start + cfg.batch_size]
            if len(batch) < 2:  # batch norm cannot train on a single sample
                continue
            images = _augment(load_images(train, batch, device), cfg, generator)
            loss = F.cross_entropy(model(images), label_tensor(train, batch, device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
        if epoch % cfg.eval_every == 0 or epoch == cfg.epochs:
            val_acc = _accuracy_on(model, train, val_idx, cfg.batch_size)
            if val_acc > best.val_acc:
                best = _Candidate(lr, epoch, val_acc, copy.deepcopy(model.state_dict()))
    return best


def _optimizer(model: nn.Module, lr: float, cfg: FineTuneConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=cfg.weight_decay)


def _lr_factor(step: int, warmup_steps: int, total_steps: int) -> float:
    """Linear warm-up, then cosine decay to zero over the remaining steps."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def _augment(images: torch.Tensor, cfg: FineTuneConfig, generator: torch.Generator) -> torch.Tensor:
    """Per-sample random translation (pad + crop) and optional horizontal flip, in one gather."""
    b, c, h, w = images.shape
    pad = cfg.crop_padding
    if pad > 0:
        padded = F.pad(images, (pad, pad, pad, pad))
        dy = torch.randint(0, 2 * pad + 1, (b,), generator=generator).to(images.device)
        dx = torch.randint(0, 2 * pad + 1, (b,), generator=generator).to(images.device)
        rows = (dy[:, None] + torch.arange(h, device=images.device))[:, None, :, None]
        cols = (dx[:, None] + torch.arange(w, device=images.device))[:, None, None, :]
        batch = torch.arange(b, device=images.device)[:, None, None, None]
        channel = torch.arange(c, device=images.device)[None, :, None, None]
        images = padded[batch, channel, rows, cols]
    if cfg.hflip:
        flip = (torch.rand(b, generator=generator) < 0.5).to(images.device)[:, None, None, None]
        images = torch.where(flip, images.flip(-1), images)
    return images


@torch.no_grad()
def _accuracy_on(model: nn.Module, images: LabelledImages, indices: np.ndarray, batch_size: int) -> float:
    model.eval()
    device = module_device(model)
    correct = 0
    for start in range(0, len(indices), batch_size):
        chunk = indices[start:start + batch_size]
        logits = model(load_images(images, chunk, device))
        correct += int((logits.argmax(dim=1) == label_tensor(images, chunk, device)).sum())
    return correct / len(indices)

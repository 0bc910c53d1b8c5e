"""Full fine-tuning: encoder + linear head trained end to end.

Paper A's protocol (it reports fine-tuning, not linear probing). Each learning rate of the grid
fine-tunes a fresh copy of the pretrained encoder; the learning rate and epoch are chosen by validation
accuracy, and the selected model is scored once on the test split (see ``common``).

The defaults are a small-scale recipe: AdamW, a cosine schedule, a random translation by up to
``crop_padding`` pixels (zero padding then a random crop, the CIFAR recipe) and, when ``hflip`` is set,
a horizontal flip (off by default: a mirrored digit is another symbol). The config adds MAE's recipe,
which paper A's code fine-tunes its ViTs with (``recipe``: layer decay, average pooling, stochastic
depth, random-resized crop, RandAugment, random erasing, mixup / cutmix, label smoothing, lr scaled by
the batch, a floor of the cosine), and the step options (bf16, channels-last, compile, on
``dssl.training.step.TrainStep``).

The recipe's augmentations run batched on the training device (``batch_augment``), in MAE's order:
the crop (random-resized: bicubic for a ViT as MAE's recipe, bilinear for a CNN as torchvision's
``RandomResizedCrop``) and flip, RandAugment on the crop, random erasing, then mixup / cutmix of the
batch. Every random parameter (shuffling, crops, flips, RandAugment's ops, erasing boxes, mixing) comes
from one seeded ``torch.Generator`` per grid point on the host; random erasing's noise and drop path
from the device's global RNG. A training set that fits on the accelerator (CIFAR) is moved there once
for the whole fine-tuning (``ResidentBatches``); larger ones are read batch by batch (``DeviceBatches``).

A run checkpoints (``progress.Checkpoint``) after every epoch and, when a stop is requested, after
the step under way; resumed, it ends with the bits of a run never stopped.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.protocols import coerce_config
from dssl.data.batches import DeviceBatches, ResidentBatches
from dssl.evaluation.batch_augment import (
    RandAugmentSpec,
    apply_mix,
    draw_rand_augment,
    mix_params,
    parse_rand_augment,
    rand_augment,
    random_erasing,
    random_resized_crop,
)
from dssl.evaluation.common import LabelledImages, correct_count, index_batches, label_tensor, module_device
from dssl.evaluation.configs import FineTuneConfig
from dssl.evaluation.progress import Checkpoint, cpu_state, rng_state, save_point, set_rng_state
from dssl.evaluation.recipe import is_vit, param_groups, require_vit, set_drop_path, soft_cross_entropy
from dssl.evaluation.splits import stratified_split
from dssl.training.step import TrainStep

GLOBAL_STREAM = 1   # key of the global-RNG seed of one grid point (drop path, random erasing's noise)


class Classifier(nn.Module):
    """The fine-tuned model: encoder features -> linear head.

    ``pool``: ``token`` feeds the encoder's own output (a ViT's class token after its final norm, a
    CNN's pooled features); ``avg`` (ViTs) the mean of the patch tokens after the last block, through
    a fresh LayerNorm, as MAE's fine-tuning does (the encoder's final norm is then unused).
    """

    def __init__(self, encoder: nn.Module, num_classes: int, pool: str = "token"):
        super().__init__()
        self.encoder = encoder
        self.fc_norm = nn.LayerNorm(encoder.feature_dim, eps=1e-6) if pool == "avg" else None
        self.head = nn.Linear(encoder.feature_dim, num_classes)
        # Zero start (MAE's fine-tuning head starts at std 2e-5): deterministic, no global RNG draw.
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        if self.fc_norm is None:
            return self.encoder(x)
        vit = self.encoder
        tokens = vit.blocks(vit.norm_pre(vit.patch_drop(vit._pos_embed(vit.patch_embed(x)))))
        return self.fc_norm(tokens[:, vit.num_prefix_tokens:].mean(dim=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))

    def after_optimizer_step(self) -> None:
        """Nothing to do (``TrainStep`` calls it for the SSL methods' EMA targets)."""


@dataclass
class _Candidate:
    lr: float
    epoch: int
    val_acc: float
    state: dict[str, torch.Tensor] = field(repr=False)

    def saved(self) -> dict[str, Any]:
        return {**asdict(self), "state": cpu_state(self.state)}


def evaluate(encoder: nn.Module, train: LabelledImages, test: LabelledImages,
             config: FineTuneConfig | Mapping[str, Any] | None = None, seed: int = 0,
             checkpoint: Checkpoint | None = None) -> dict[str, Any]:
    """Fine-tuning accuracy of ``encoder`` (left unchanged): test accuracy of the val-selected model."""
    cfg = coerce_config(FineTuneConfig, config)  # checks the values
    require_vit(encoder, cfg)
    fit_idx, val_idx = stratified_split(train.labels, cfg.val_fraction, seed)
    run = FineTuning(encoder, train, cfg, fit_idx, val_idx, seed, checkpoint)
    best, grid = run.select()
    run.model.load_state_dict(best.state)
    test_acc = correct_count(run.model, test, np.arange(len(test)), cfg.batch_size, cfg.step_options) / len(test)
    return {
        "protocol": "finetune", "test_acc": test_acc, "val_acc": best.val_acc, "lr": best.lr,
        "weight_decay": cfg.weight_decay, "optimizer": cfg.optimizer, "epochs": best.epoch, "max_epochs": cfg.epochs,
        "num_fit": len(fit_idx), "num_val": len(val_idx), "num_test": len(test), "seed": seed, "grid": grid,
    }


def lr_factor(step: int, warmup_steps: int, total_steps: int, schedule: str = "cosine",
              min_ratio: float = 0.0) -> float:
    """The lr multiplier after ``step`` optimizer steps: linear warm-up, then ``cosine`` decay from 1 to
    ``min_ratio`` over the remaining steps, or ``constant`` 1."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return cosine if min_ratio == 0 else min_ratio + (1.0 - min_ratio) * cosine


class FineTuning:
    """The grid of learning rates fine-tuned one after another, checkpointed at every safe point."""

    def __init__(self, encoder: nn.Module, train: LabelledImages, cfg: FineTuneConfig, fit_idx: np.ndarray,
                 val_idx: np.ndarray, seed: int, checkpoint: Checkpoint | None = None):
        self.train, self.cfg, self.fit_idx, self.val_idx, self.seed = train, cfg, fit_idx, val_idx, seed
        self.checkpoint = checkpoint
        self.device = module_device(encoder)
        self.model = Classifier(copy.deepcopy(encoder), train.num_classes, cfg.pool).to(self.device)
        if cfg.drop_path > 0:
            set_drop_path(self.model.encoder, cfg.drop_path)
        self.initial = copy.deepcopy(self.model.state_dict())
        self.size = train.image_shape[-1] if hasattr(train, "image_shape") else None
        self.rand_augment = parse_rand_augment(cfg.rand_augment) if cfg.rand_augment else None
        self.crop_mode = "bicubic" if is_vit(encoder) else "bilinear"
        reader = ResidentBatches if ResidentBatches.fits(train, self.device) else DeviceBatches
        self.reader = reader(train, self.device, resize=cfg.crop != "resized")
        self.steps_per_epoch = math.ceil(len(fit_idx) / cfg.batch_size)
        self.step: TrainStep | None = None

    def select(self) -> tuple[_Candidate, list[dict[str, Any]]]:
        """The best (lr, epoch) by validation accuracy (ties: the first), and every lr's outcome."""
        saved = self.checkpoint.load() if self.checkpoint is not None else None
        grid, best = ([], None) if saved is None else (saved["grid"], _restored(saved["best"]))
        first = 0 if saved is None else saved["lr_index"]
        for lr_index in range(first, len(self.cfg.lr_grid)):
            candidate = self._fine_tune(lr_index, grid, best, saved if lr_index == first else None)
            grid.append({"lr": candidate.lr, "epoch": candidate.epoch, "val_acc": candidate.val_acc})
            if best is None or candidate.val_acc > best.val_acc:
                best = candidate
        return best, grid

    def _fine_tune(self, lr_index: int, grid: list, best: _Candidate | None, saved: dict | None) -> _Candidate:
        """Train grid point ``lr_index`` from the pretrained weights (or from ``saved``); keep its best
        validation epoch (ties: the earliest)."""
        cfg, lr = self.cfg, self.cfg.lr_grid[lr_index]
        self.model.load_state_dict(self.initial)
        optimizer = _optimizer(self.model, cfg, cfg.learning_rate(lr))
        if self.step is None:   # converts and compiles the model once
            self.step = TrainStep(self.model, optimizer, cfg.step_options)
        self.step.optimizer = optimizer
        generator = torch.Generator().manual_seed(self.seed)
        torch.manual_seed(int(np.random.SeedSequence([self.seed, lr_index, GLOBAL_STREAM]).generate_state(1)[0]))
        current, epochs_done, position, order, steps = _Candidate(lr, 0, -1.0, {}), 0, 0, None, 0
        if saved is not None:
            self.model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            generator.set_state(saved["generator"])
            set_rng_state(saved["rng"])
            current, epochs_done, position = _restored(saved["current"]), saved["epoch"], saved["step"]
            order, steps = (None if saved["order"] is None else saved["order"].numpy()), saved["steps"]
        self._set_lr(optimizer, steps, lr)

        def state(epoch: int, step: int, epoch_order: np.ndarray | None) -> dict[str, Any]:
            return {"lr_index": lr_index, "grid": list(grid), "best": best.saved() if best else None,
                    "current": current.saved() if current.state else asdict(current),
                    "epoch": epoch, "step": step, "steps": steps,
                    "order": None if epoch_order is None else torch.from_numpy(epoch_order.copy()),
                    "model": cpu_state(self.model.state_dict()), "optimizer": optimizer.state_dict(),
                    "generator": generator.get_state(), "rng": rng_state()}

        for epoch in range(epochs_done + 1, cfg.epochs + 1):
            self.model.train()
            if order is None:
                order = self.fit_idx[torch.randperm(len(self.fit_idx), generator=generator).numpy()]
            batches = index_batches(order, cfg.batch_size)[position:]
            for number, (indices, pixels) in enumerate(zip(batches, self.reader(batches)), position):
                self._train_step(pixels, indices, generator)
                steps += 1
                self._set_lr(optimizer, steps, lr)
                save_point(self.checkpoint, lambda: state(epoch - 1, number + 1, order), False,
                           f"at step {number + 1} of epoch {epoch} (lr {lr})")
            position, order = 0, None
            if epoch % cfg.eval_every == 0 or epoch == cfg.epochs:
                val_acc = correct_count(self.model, self.train, self.val_idx, cfg.batch_size,
                                        cfg.step_options) / len(self.val_idx)
                if val_acc > current.val_acc:
                    current = _Candidate(lr, epoch, val_acc, copy.deepcopy(self.model.state_dict()))
            save_point(self.checkpoint, lambda: state(epoch, 0, None), True, f"after epoch {epoch} (lr {lr})")
        return current

    def _train_step(self, pixels: torch.Tensor, indices: np.ndarray, generator: torch.Generator) -> None:
        """One optimizer step on a batch of [0, 1] pixels at the stored size: its augmented views, mixed
        with soft targets when the recipe mixes."""
        cfg = self.cfg
        images = augment(pixels, cfg, generator, self.size, self.rand_augment, self.crop_mode)
        labels = label_tensor(self.train, indices, self.device)
        if cfg.mixes:
            mixing = mix_params(images.shape[-2], images.shape[-1], cfg.mixup, cfg.cutmix, cfg.mixup_prob,
                                cfg.mixup_switch_prob, generator)
            images, targets = apply_mix(images, labels, self.train.num_classes, cfg.label_smoothing, mixing)
            self.step(images, lambda x: {"loss": soft_cross_entropy(self.model(x), targets)})
        else:
            self.step(images, lambda x: {"loss": F.cross_entropy(self.model(x), labels,
                                                                 label_smoothing=cfg.label_smoothing)})

    def _set_lr(self, optimizer: torch.optim.Optimizer, steps: int, lr: float) -> None:
        """Each group at its initial lr times the schedule's factor after ``steps`` steps (``min_lr`` is
        the floor of grid value ``lr``'s peak, scaled with each group as MAE's schedule does)."""
        cfg = self.cfg
        factor = lr_factor(steps, self.steps_per_epoch * cfg.warmup_epochs, self.steps_per_epoch * cfg.epochs,
                           cfg.schedule, cfg.min_lr / cfg.learning_rate(lr) if cfg.min_lr else 0.0)
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"] * factor


def _optimizer(model: nn.Module, cfg: FineTuneConfig, lr: float) -> torch.optim.Optimizer:
    groups = param_groups(model, cfg, lr)
    if cfg.optimizer == "sgd":
        optimizer = torch.optim.SGD(groups, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    else:
        optimizer = torch.optim.AdamW(groups, lr=lr, weight_decay=cfg.weight_decay)
    for group in optimizer.param_groups:
        group["initial_lr"] = group["lr"]
    return optimizer


def _restored(saved: dict[str, Any] | None) -> _Candidate | None:
    return None if saved is None else _Candidate(saved["lr"], saved["epoch"], saved["val_acc"], saved["state"])


def augment(pixels: torch.Tensor, cfg: FineTuneConfig, generator: torch.Generator, size: int | None,
            spec: RandAugmentSpec | None = None, crop_mode: str = "bilinear") -> torch.Tensor:
    """The training views of a batch of [0, 1] pixels, on its device: a translation (``crop: translate``)
    or a random-resized crop to ``size`` (``crop: resized``, interpolated by ``crop_mode``), a flip when
    ``hflip``, RandAugment ``spec`` on the crop, then random erasing. Every parameter is drawn from
    ``generator`` on the host; the crop and RandAugment work on whole pixel values, as PIL's do."""
    if cfg.crop != "resized" and spec is None:   # the small-scale recipe, in [0, 1] throughout
        images = _translate_flip(pixels, cfg, generator)
    else:
        levels = pixels.mul(255.0).round_()
        if cfg.crop == "resized":
            levels = random_resized_crop(levels, size or pixels.shape[-1], cfg.crop_scale,
                                         0.5 if cfg.hflip else 0.0, generator, crop_mode)
        else:
            levels = _translate_flip(levels, cfg, generator)
        if spec is not None:
            levels = rand_augment(levels, draw_rand_augment(spec, len(levels), generator))
        images = levels.div_(255.0)
    return random_erasing(images, cfg.random_erasing, generator) if cfg.random_erasing > 0 else images


def _translate_flip(images: torch.Tensor, cfg: FineTuneConfig, generator: torch.Generator) -> torch.Tensor:
    """Per-sample random translation (pad + crop) and optional horizontal flip, in one gather."""
    b, c, h, w = images.shape
    pad, device = cfg.crop_padding, images.device
    if pad > 0:
        padded = F.pad(images, (pad, pad, pad, pad))
        dy = torch.randint(0, 2 * pad + 1, (b,), generator=generator).to(device, non_blocking=True)
        dx = torch.randint(0, 2 * pad + 1, (b,), generator=generator).to(device, non_blocking=True)
        rows = (dy[:, None] + torch.arange(h, device=device))[:, None, :, None]
        cols = (dx[:, None] + torch.arange(w, device=device))[:, None, None, :]
        batch = torch.arange(b, device=device)[:, None, None, None]
        channel = torch.arange(c, device=device)[None, :, None, None]
        images = padded[batch, channel, rows, cols]
    if cfg.hflip:
        flip = (torch.rand(b, generator=generator) < 0.5).to(device, non_blocking=True)[:, None, None, None]
        images = torch.where(flip, images.flip(-1), images)
    return images

"""The pieces of MAE's fine-tuning recipe (He et al., 2022, appendix A.2; paper A's code fine-tunes its
ViTs with it): layer-wise lr decay, stochastic depth, mixup / cutmix with label smoothing, random
erasing and RandAugment. timm supplies what it has as functions (``mixup_target``,
``rand_augment_transform``, ``DropPath``). Every draw comes from a stream the run
seeds and checkpoints (mixup: a numpy Generator; erasing and drop path: the device's global torch RNG;
RandAugment: Python's and numpy's global generators, which timm's ops use, seeded per batch right
before, in the one thread that runs it), so a resumed run repeats them.

- Layer decay: MAE's rule (its ``param_groups_lrd``, which paper A's code calls): patch embedding,
  class token and position embedding are layer 0, block i is layer i + 1, everything after the blocks
  (final norm, pooling norm, head) is layer depth + 1; layer l's lr is scaled by
  ``layer_decay ** (depth + 1 - l)``. (timm's ``param_groups_layer_decay`` puts the final norm with the
  last block and scales the last block by 1, one step less decay throughout: not paper A's.)
- Mixup / cutmix (Zhang et al., 2018; Yun et al., 2019), per batch as timm's ``Mixup(mode="batch")``:
  with probability ``mixup_prob`` the batch is mixed with itself reversed, by cutmix with probability
  ``mixup_switch_prob`` when both are on; lambda ~ Beta(alpha, alpha); cutmix pastes a box of area
  about (1 - lambda) with a uniform centre, clipped to the image, and lambda becomes the share not pasted.
  Targets are smoothed one-hot vectors mixed by lambda; the loss is the soft-target cross entropy.
- Random erasing (Zhong et al., 2020; timm's ``RandomErasing(mode="pixel")``): with probability p a
  rectangle of 2 %..1/3 of the image and aspect ratio 0.3..3.3 (up to 10 tries for one that fits) gets
  Gaussian noise with ImageNet's channel mean and std (timm's N(0, 1) in normalised space, in the [0, 1]
  pixel range the encoders read).
- RandAugment (Cubuk et al., 2020) as timm's ``rand_augment_transform`` (e.g. ``rand-m9-mstd0.5-inc1``):
  per image, on the host, at the stored resolution (before the random-resized crop; timm's pipeline
  applies it after the crop, at 224 px), seeded per batch. A magnitude drawn at timm's maximum (10,
  reachable with ``mstd``) is taken as 9.99: at 10 timm's posterize keeps 0 bits, which Pillow >= 10
  refuses; every other operation changes by under 0.1 % of its range.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dssl.data.batches import IMAGENET_MEAN, IMAGENET_STD
from dssl.evaluation.configs import FineTuneConfig

ERASE_AREA = (0.02, 1 / 3)
ERASE_LOG_ASPECT = (math.log(0.3), math.log(1 / 0.3))
ERASE_TRIES = 10
RAND_AUGMENT_MAGNITUDE_MAX = 9.99   # timm's is 10, where its posterize asks Pillow for 0 bits


def is_vit(encoder: nn.Module) -> bool:
    """A timm VisionTransformer (what layer decay, drop path and token pooling apply to)."""
    return hasattr(encoder, "blocks") and hasattr(encoder, "group_matcher")


def require_vit(encoder: nn.Module, cfg: FineTuneConfig) -> None:
    """ViT-only recipe keys on another encoder: one clear error before training."""
    asked = [key for key, on in (("layer_decay", cfg.layer_decay < 1), ("drop_path", cfg.drop_path > 0),
                                 ("pool: avg", cfg.pool == "avg")) if on]
    if asked and not is_vit(encoder):
        raise ValueError(f"fine-tuning keys {asked} apply to ViT encoders only, not {type(encoder).__name__}; "
                         "set them under evaluate.finetune.per_family.vit")


def param_groups(model: nn.Module, cfg: FineTuneConfig, lr: float) -> Any:
    """The optimizer's parameters: all in one group (plain), or groups with their own weight decay and,
    with layer decay, lr scale (``lr_scale``; each group's ``lr`` is ``lr * lr_scale``)."""
    if cfg.layer_decay == 1 and not cfg.exclude_norm_bias_from_decay:
        return model.parameters()
    depth = len(model.encoder.blocks) if cfg.layer_decay < 1 else 0
    exempt_names = set(model.encoder.no_weight_decay()) if hasattr(model.encoder, "no_weight_decay") else set()
    groups: dict[tuple[int, bool], dict] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        exempt = cfg.exclude_norm_bias_from_decay and (
            param.ndim <= 1 or name.endswith(".bias") or name.removeprefix("encoder.") in exempt_names)
        layer = vit_layer(name, depth) if depth else 0
        scale = cfg.layer_decay ** (depth + 1 - layer) if depth else 1.0
        group = groups.setdefault((layer, exempt), {"params": [], "weight_decay": 0.0 if exempt else cfg.weight_decay,
                                                    "lr_scale": scale, "lr": lr * scale})
        group["params"].append(param)
    return list(groups.values())


def vit_layer(name: str, depth: int) -> int:
    """MAE's layer id of a Classifier parameter: 0 for the stem, i + 1 for block i, depth + 1 after."""
    inside = name.removeprefix("encoder.")
    if name.startswith("encoder.") and inside.split(".")[0] in ("cls_token", "pos_embed", "patch_embed"):
        return 0
    if name.startswith("encoder.blocks."):
        return int(inside.split(".")[1]) + 1
    return depth + 1


def set_drop_path(vit: nn.Module, rate: float) -> None:
    """Stochastic depth in every block of ``vit``, rising linearly from 0 to ``rate`` (timm's rule)."""
    from timm.layers import DropPath

    depth = len(vit.blocks)
    for index, block in enumerate(vit.blocks):
        block_rate = rate * index / max(depth - 1, 1)
        if block_rate > 0:
            block.drop_path1, block.drop_path2 = DropPath(block_rate), DropPath(block_rate)


def mix_batch(images: torch.Tensor, labels: torch.Tensor, num_classes: int, cfg: FineTuneConfig,
              rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixup or cutmix of a batch with itself reversed; the mixed images and their soft targets.
    The draws (per batch: whether, which, lambda, the box) come from ``rng`` on the host."""
    from timm.data.mixup import mixup_target

    lam, cutmix = 1.0, False
    if rng.random() < cfg.mixup_prob:
        cutmix = cfg.cutmix > 0 and (cfg.mixup <= 0 or rng.random() < cfg.mixup_switch_prob)
        alpha = cfg.cutmix if cutmix else cfg.mixup
        lam = float(rng.beta(alpha, alpha))
    if lam < 1.0 and cutmix:
        (top, bottom, left, right), lam = cutmix_box(images.shape[-2], images.shape[-1], lam, rng)
        images = images.clone()
        images[:, :, top:bottom, left:right] = images.flip(0)[:, :, top:bottom, left:right]
    elif lam < 1.0:
        images = images * lam + images.flip(0) * (1.0 - lam)
    return images, mixup_target(labels, num_classes, lam, cfg.label_smoothing)


def cutmix_box(height: int, width: int, lam: float,
               rng: np.random.Generator) -> tuple[tuple[int, int, int, int], float]:
    """A box covering about (1 - lam) of the image, its centre uniform, clipped to the image; and the
    share of the image outside it (the mixed targets' lambda)."""
    ratio = math.sqrt(1.0 - lam)
    cut_h, cut_w = int(height * ratio), int(width * ratio)
    centre_y, centre_x = int(rng.integers(0, height)), int(rng.integers(0, width))
    top, bottom = max(centre_y - cut_h // 2, 0), min(centre_y + cut_h // 2, height)
    left, right = max(centre_x - cut_w // 2, 0), min(centre_x + cut_w // 2, width)
    return (top, bottom, left, right), 1.0 - (bottom - top) * (right - left) / (height * width)


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross entropy against soft targets (timm's ``SoftTargetCrossEntropy``)."""
    return torch.sum(-targets * F.log_softmax(logits.float(), dim=-1), dim=-1).mean()


def random_erasing(images: torch.Tensor, probability: float) -> torch.Tensor:
    """Each image, with ``probability``, gets one rectangle of Gaussian noise (module docstring); every
    draw from the device's global RNG, so no host round trip."""
    b, c, h, w = images.shape
    device = images.device
    apply = torch.rand(b, device=device) < probability
    area = torch.empty(b, ERASE_TRIES, device=device).uniform_(*ERASE_AREA) * (h * w)
    aspect = torch.empty(b, ERASE_TRIES, device=device).uniform_(*ERASE_LOG_ASPECT).exp()
    box_h, box_w = (area * aspect).sqrt().round(), (area / aspect).sqrt().round()
    fits = (box_h < h) & (box_w < w)
    first = fits.int().argmax(dim=1, keepdim=True)      # the first try that fits (0 when none does)
    box_h, box_w = box_h.gather(1, first).squeeze(1), box_w.gather(1, first).squeeze(1)
    apply &= fits.any(dim=1)
    top = (torch.rand(b, device=device) * (h - box_h + 1)).floor()
    left = (torch.rand(b, device=device) * (w - box_w + 1)).floor()
    rows = torch.arange(h, device=device)[None, :]
    cols = torch.arange(w, device=device)[None, :]
    inside_rows = (rows >= top[:, None]) & (rows < (top + box_h)[:, None])
    inside_cols = (cols >= left[:, None]) & (cols < (left + box_w)[:, None])
    mask = (inside_rows[:, :, None] & inside_cols[:, None, :] & apply[:, None, None])[:, None]
    mean, std = _channel_stats(c, images)
    noise = torch.randn(images.shape, device=device, dtype=images.dtype) * std + mean
    return torch.where(mask, noise, images)


def _channel_stats(channels: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean = IMAGENET_MEAN if channels == 3 else (sum(IMAGENET_MEAN) / 3,) * channels
    std = IMAGENET_STD if channels == 3 else (sum(IMAGENET_STD) / 3,) * channels
    shape = (1, channels, 1, 1)
    return like.new_tensor(mean).view(shape), like.new_tensor(std).view(shape)


class HostRandAugment:
    """timm's RandAugment on uint8 ``[B, C, H, W]`` batches, image by image (PIL), seeded per batch from
    ``(seed, *keys, batch number)``: the same images get the same operations on a resumed run."""

    def __init__(self, config: str, seed: int, *keys: int):
        from timm.data.auto_augment import rand_augment_transform

        self.config, self.keys = config, (int(seed), *map(int, keys))
        self._transforms: dict[int, Any] = {}
        self._make = lambda channels: rand_augment_transform(
            config, {"img_mean": tuple(round(255 * m) for m in IMAGENET_MEAN) if channels == 3 else 128,
                     "magnitude_max": RAND_AUGMENT_MAGNITUDE_MAX})

    def __call__(self, pixels: torch.Tensor, number: int) -> torch.Tensor:
        from PIL import Image

        channels = pixels.shape[1]
        transform = self._transforms.setdefault(channels, self._make(channels))
        state = np.random.SeedSequence([*self.keys, int(number)]).generate_state(2)
        # timm's ops draw from Python's and numpy's global generators: seeded here, per batch.
        random.seed(int(state[0]))
        np.random.seed(int(state[1]))
        out = np.empty(tuple(pixels.shape), dtype=np.uint8)
        for index, image in enumerate(pixels.numpy()):
            hwc = image.transpose(1, 2, 0)
            picture = Image.fromarray(hwc[:, :, 0] if channels == 1 else hwc)
            result = np.asarray(transform(picture), dtype=np.uint8)
            out[index] = result[None] if channels == 1 else result.transpose(2, 0, 1)
        return torch.from_numpy(out)

"""The pieces of MAE's fine-tuning recipe (He et al., 2022, appendix A.2; paper A's code fine-tunes its
ViTs with it) that shape the model and its optimisation: layer-wise lr decay, stochastic depth and the
soft-target loss of mixed labels. The augmentations (random-resized crop, flip, RandAugment, random
erasing, mixup / cutmix with label smoothing) run batched on the training device, after the crop as
MAE's pipeline applies them: ``dssl.evaluation.batch_augment``.

- Layer decay: MAE's rule (its ``param_groups_lrd``, which paper A's code calls): patch embedding,
  class token and position embedding are layer 0, block i is layer i + 1, everything after the blocks
  (final norm, pooling norm, head) is layer depth + 1; layer l's lr is scaled by
  ``layer_decay ** (depth + 1 - l)``. (timm's ``param_groups_layer_decay`` puts the final norm with the
  last block and scales the last block by 1, one step less decay throughout: not paper A's.)
- Stochastic depth: timm's ``DropPath`` in every block, its rate rising linearly over depth; its draws
  come from the device's global RNG, which a run seeds and checkpoints.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dssl.evaluation.configs import FineTuneConfig


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


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross entropy against soft targets (timm's ``SoftTargetCrossEntropy``)."""
    return torch.sum(-targets * F.log_softmax(logits.float(), dim=-1), dim=-1).mean()

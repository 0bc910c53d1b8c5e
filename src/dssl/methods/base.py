"""The contract every SSL method meets, and the factory that builds a method from its spec.

The training engine relies on:
- ``training_loss(images)`` with a float batch [B, C, H, W] in [0, 1] (already client-augmented):
  the method draws its own views and returns a dict of scalar tensors with at least ``"loss"``;
- ``encoder``: the backbone, ``encoder(x) -> [B, feature_dim]`` for evaluation;
- ``representation(images) -> [B, D]``: one embedding per image, paper A's z for MAR alignment;
- ``local_state_keys()``: state_dict keys a federation strategy may keep on the client;
- ``client_state_keys()``: per-client memory (EMA target / momentum networks, MoCo's queue) that
  every strategy keeps on the client: never uploaded, replaced by a global model, or mixed;
- ``round_memory_keys()``: the part of that memory that restarts every round instead of persisting;
- ``part_keys(part)``: the state keys of one part of the Siamese model (paper B's framework):
  ``online`` (encoder + projector), ``predictor``, ``target`` (EMA target) or ``memory`` (queue);
- ``after_optimizer_step()``: called after every optimiser step (EMA targets update here);
- ``name``: the method's name in ``params.yaml``, given to the class by its spec (``dssl.config.methods``).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import torch
from torch import nn

from dssl.config.methods import METHOD_SPECS  # standard library only
from dssl.models.backbones import create_backbone


@dataclass
class LossOutput:
    """What a method computes on one batch.

    ``losses``: scalar tensors, ``"loss"`` the one to minimise (others are diagnostics);
    ``representation``: [B, D], one embedding per image, from the same forward pass;
    ``tokens``: [B, T, D], the encoder tokens the representation pools, where the method has them
    (MAE: class token + visible patch tokens), for paper A's released-code MAR variant.
    """

    losses: dict[str, torch.Tensor]
    representation: torch.Tensor
    tokens: torch.Tensor | None = None


class SSLMethod(nn.Module, ABC):
    """Base of the SSL methods: an ``encoder`` plus method-specific heads, loss and view transform.

    Subclasses implement :meth:`compute_loss` and take their hyper-parameters as one config dataclass,
    declared in the method's spec module (``dssl.config.methods.<name>``; ``None`` = derive the value from
    the backbone); the resolved values are kept in ``hparams`` for logging. The spec gives the class its
    ``name`` when it loads it. ``local_modules`` names the submodules
    whose state a federation strategy may optionally keep on the client (the predictor: paper B's
    "keep local knowledge"). ``target_sources`` maps each EMA target submodule to the online
    submodule it follows (BYOL's target, MoCo's key networks) and ``memory_modules`` names other
    per-client memory (MoCo's queue and pointer): both are client-local in every strategy, because
    they summarise one client's own training and data (averaging queues across clients would mix
    other clients' keys into a client's negatives).
    """

    name: ClassVar[str]
    local_modules: ClassVar[tuple[str, ...]] = ()
    target_sources: ClassVar[Mapping[str, str]] = {}
    memory_modules: ClassVar[tuple[str, ...]] = ()
    predictor_modules: ClassVar[tuple[str, ...]] = ("predictor",)

    def __init__(self, encoder: nn.Module, hparams: dict[str, Any]) -> None:
        super().__init__()
        self.encoder = encoder
        self.hparams = hparams

    @abstractmethod
    def compute_loss(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> LossOutput:
        """Make the views of ``images`` and compute the losses and the representation."""

    def training_loss(
        self,
        images: torch.Tensor,
        *,
        with_representation: bool = False,
        generator: torch.Generator | None = None,
    ) -> dict[str, torch.Tensor]:
        """Scalar losses of one batch (``"loss"`` is minimised).

        With ``with_representation`` the dict also holds ``"representation"`` [B, D], computed in the
        same forward pass (MAR adds its alignment term on it without a second encoder pass), and
        ``"tokens"`` [B, T, D] where the method has them.
        """
        out = self.compute_loss(images, generator)
        losses = dict(out.losses)
        if with_representation:
            losses["representation"] = out.representation
            if out.tokens is not None:
                losses["tokens"] = out.tokens
        return losses

    def representation(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """One embedding per image, [B, D]: the encoder's pooled features (MAE overrides this)."""
        del generator  # deterministic here; masked methods draw a mask
        return self.encoder(images)

    def local_state_keys(self) -> list[str]:
        """state_dict keys under ``local_modules``: state a strategy may keep local (e.g. FedU, FedEMA)."""
        return [key for key in self.state_dict() if key.split(".")[0] in self.local_modules]

    def client_state_keys(self) -> list[str]:
        """Per-client memory: the EMA target networks and ``memory_modules`` (never shared)."""
        return self.part_keys("target") + self.part_keys("memory")

    def round_memory_keys(self) -> list[str]:
        """Per-client memory that starts every round a client trains as at its first (target networks copied
        from the online ones it starts from, other memory the initial one) instead of persisting: none by
        default; paper B's code resets MoCo's key encoder and queue every round."""
        return []

    def part_keys(self, part: str) -> list[str]:
        """state_dict keys of ``part``: ``online``, ``predictor``, ``target`` or ``memory``.

        ``online`` is everything that is not one of the other three (encoder and projector).
        """
        prefixes = {"predictor": set(self.predictor_modules), "target": set(self.target_sources),
                    "memory": set(self.memory_modules)}
        if part not in (*prefixes, "online"):
            raise ValueError(f"unknown model part {part!r}; known: online, {', '.join(prefixes)}")
        keys = list(self.state_dict())
        if part == "online":
            others = set().union(*prefixes.values())
            return [k for k in keys if k.split(".")[0] not in others]
        return [k for k in keys if k.split(".")[0] in prefixes[part]]

    def online_key_of(self, target_key: str) -> str:
        """The online key a target key follows, e.g. ``target_encoder.w`` -> ``encoder.w``."""
        head, _, rest = target_key.partition(".")
        return f"{self.target_sources[head]}.{rest}" if rest else self.target_sources[head]

    def after_optimizer_step(self) -> None:
        """Hook called by the engine after every optimiser step; EMA-target methods update here."""


def create_method(
    name: str, backbone: str, image_size: int, in_chans: int, **hparams: Any
) -> SSLMethod:
    """Build method ``name`` on a fresh ``backbone`` for ``image_size`` px, ``in_chans``-channel images.

    The method's spec (``METHOD_SPECS``) declares the accepted hyper-parameters; the values become its
    config, checked when it is made, and only then is the method's module imported. Unknown method or
    backbone names raise an ``UnknownNameError`` (a KeyError and ValueError) listing the known ones; unknown
    hyper-parameters raise a ValueError listing the declared ones; a value outside its declaration a
    ValueError naming it.
    """
    spec = METHOD_SPECS[name]
    config = spec.options(hparams)
    cls = spec.load()
    encoder = create_backbone(backbone, image_size, in_chans)
    method = cls(encoder, image_size, in_chans, config)
    method.build_args = (name, backbone, image_size, in_chans, dict(hparams))   # for ``rebuild_method``
    return method


def rebuild_method(method: SSLMethod, seed: int) -> SSLMethod:
    """A new method built as ``method`` was by ``create_method`` (same method, backbone, sizes and
    hyper-parameters), its weights drawn by the same initialisation from ``seed``, on ``method``'s device.
    The global RNG is left as it was."""
    build_args = getattr(method, "build_args", None)
    if build_args is None:
        raise ValueError(f"method {type(method).__name__} was not built by create_method; it cannot be rebuilt")
    name, backbone, image_size, in_chans, hparams = build_args
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = create_method(name, backbone, image_size, in_chans, **hparams)
    return fresh.to(next(method.parameters()).device)


@torch.no_grad()
def ema_update(target: nn.Module, online: nn.Module, momentum: float) -> None:
    """Parameters: target <- momentum * target + (1 - momentum) * online (BYOL's target, MoCo's key
    encoder). Buffers (BN running statistics) are the target's own, as in both papers' code.

    One ``torch._foreach_lerp_`` over all parameters: on an accelerator a few fused kernels instead of
    one launch per parameter; on the CPU it runs the same per-tensor lerp, so the bits do not change."""
    targets, onlines = list(target.parameters()), list(online.parameters())
    if len(targets) != len(onlines):
        raise ValueError(f"EMA target has {len(targets)} parameter tensors, the online network {len(onlines)}")
    torch._foreach_lerp_(targets, onlines, 1 - momentum)


def make_ema_target(
    encoder: nn.Module, projector: nn.Module, enabled: bool, trainable: bool = False
) -> tuple[nn.Module | None, nn.Module | None]:
    """Copies of ``encoder`` and ``projector`` as an EMA target, or ``(None, None)`` without one.

    ``trainable``: the copies keep ``requires_grad`` (paper B's no-stop-gradient ablation, where the
    gradient reaches the target branch); otherwise only the EMA moves them.
    """
    if not enabled:
        return None, None
    return (copy.deepcopy(encoder).requires_grad_(trainable),
            copy.deepcopy(projector).requires_grad_(trainable))


def require_feature_map(encoder: nn.Module, method: str, alternative: str) -> nn.Module:
    """The encoder if it has a spatial feature map (a CNN), else a ValueError."""
    if not (hasattr(encoder, "forward_features") and hasattr(encoder, "feature_stride")):
        raise ValueError(
            f"method {method!r} needs a CNN backbone with a spatial feature map "
            f"(resnet18_cifar, resnet18_imagenet, cnn_small); use {alternative!r} for ViTs"
        )
    return encoder


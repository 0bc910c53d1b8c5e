"""Paper B's Siamese framework: the body BYOL and SimSiam share.

Paper B (Section 3) casts both as one model: an online network (encoder + projector), a predictor
on it, and a target network whose projection of the other view the prediction is pulled toward. Its
design-space study (Section 4) moves one method toward the other with three switches, which both
methods take as hyper-parameters:

- ``predictor``: without it the loss compares projections directly (both methods collapse);
- ``stop_gradient``: whether the loss differentiates the target branch;
- ``ema_target``: the target is an EMA of the online encoder + projector (BYOL's default), moved by
  ``momentum`` after every optimiser step, or the online network itself (SimSiam's default).

:class:`SiameseMethod` owns that machinery (the two views, the branches, the EMA); a method adds its
heads, loss, view transform and defaults, and any diagnostics of its own (:meth:`diagnostics`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dssl.methods.base import LossOutput, SSLMethod, ema_update, make_ema_target


class SiameseMethod(SSLMethod):
    """Online encoder + ``projector`` + optional ``predictor`` against a target branch; ``criterion``
    (p1, p2, t1, t2) -> loss compares each view's prediction with the other view's target projection.

    ``hparams`` must hold ``stop_gradient``, ``ema_target`` and ``momentum``. ``local_modules``: the
    predictor (paper B's "keep local knowledge", FedU / FedEMA). The EMA target is per-client memory
    (``target_sources``): every strategy keeps it on the client.
    """

    local_modules = ("predictor",)
    target_sources = {"target_encoder": "encoder", "target_projector": "projector"}

    def __init__(self, encoder: nn.Module, hparams: dict[str, Any], *, projector: nn.Module,
                 predictor: nn.Module | None, criterion: nn.Module, transform: nn.Module) -> None:
        super().__init__(encoder, hparams)
        self.momentum = hparams["momentum"]
        self.stop_gradient = bool(hparams["stop_gradient"])
        self.projector = projector
        self.predictor = predictor
        # Under no stop-gradient the gradient reaches the target copies too: they stay trainable (the
        # optimiser steps them, then the EMA pulls them toward the online network).
        self.target_encoder, self.target_projector = make_ema_target(
            encoder, projector, hparams["ema_target"], trainable=not self.stop_gradient)
        self.criterion = criterion
        self.transform = transform

    def compute_loss(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> LossOutput:
        x1, x2 = self.transform(images, generator), self.transform(images, generator)
        # Views go through the network separately so BN statistics are per view, as in both methods.
        f1, f2 = self.encoder(x1), self.encoder(x2)
        z1, z2 = self.projector(f1), self.projector(f2)
        p1, p2 = (self.predictor(z1), self.predictor(z2)) if self.predictor is not None else (z1, z2)
        t1, t2 = self.target_projections(x1, x2, z1, z2)
        losses = {"loss": self.criterion(p1, p2, t1, t2), **self.diagnostics(z1)}
        return LossOutput(losses, representation=f1)

    def target_projections(self, x1: torch.Tensor, x2: torch.Tensor, z1: torch.Tensor,
                           z2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The target branch's projections of both views.

        With an EMA target, its projections of ``x1``, ``x2`` (under ``no_grad`` with stop-gradient);
        without one the online projections ``z1``, ``z2`` themselves (the loss detaches them under
        stop-gradient).
        """
        if self.target_encoder is None:
            return z1, z2
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.stop_gradient):
            return self.target_projector(self.target_encoder(x1)), self.target_projector(self.target_encoder(x2))

    def diagnostics(self, z1: torch.Tensor) -> dict[str, torch.Tensor]:
        """Detached scalars logged beside the loss, from view 1's projection; none by default."""
        del z1
        return {}

    def update_target(self, momentum: float) -> None:
        """target <- momentum * target + (1 - momentum) * online (encoder and projector), if EMA."""
        if self.target_encoder is not None:
            ema_update(self.target_encoder, self.encoder, momentum)
            ema_update(self.target_projector, self.projector, momentum)

    def after_optimizer_step(self) -> None:
        self.update_target(self.momentum)

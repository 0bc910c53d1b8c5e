"""Paper B's [0] Siamese framework: the body BYOL [2] and SimSiam [1] share.

Paper B (Section 3) casts both as one model: an online network (encoder + projector), a predictor
on it, and a target network whose projection of the other view the prediction is pulled toward. Its
design-space study (Section 4) moves one method toward the other with three switches, which both
methods take as hyper-parameters:

- ``predictor``: without it the loss compares projections directly (both methods collapse);
- ``stop_gradient``: whether the loss differentiates the target branch;
- ``ema_target``: the target is an EMA of the online encoder + projector (BYOL's default), moved by
  ``momentum`` after every optimiser step, or the online network itself (SimSiam's default).

What "without" means follows the methods' own papers by default, and paper B's code is an option:

- without stop-gradient (``stop_gradient: false``): the loss is differentiated through the target
  branch, as SimSiam (Chen & He, CVPR 2021, Sec. 4.1) removes it; with an EMA target that gradient
  reaches the target's own parameters, which the optimiser then steps (``target_optimized: true``,
  default) before the EMA pulls them toward the online network. Paper B's code leaves the target out
  of its optimiser (``target_optimized: false``): the gradient reaches nothing, and after a client's
  first round the run equals the stop-gradient one (in that round its target *is* the online network:
  the FedSSL strategy's ``first_round_target: online``).
- without an EMA target (``ema_target: false``): the target is the online network itself, BYOL's
  tau = 0 (Grill et al., NeurIPS 2020, Sec. 5.1 / Table 5a: the target updated instantaneously).
  Paper B's code instead stops the EMA (its ``momentum_update`` off): the target is frozen, BYOL's
  tau = 1 -- ``momentum: 1.0`` here (again with the target as the online network in a client's first
  round under ``first_round_target: online``).

:class:`SiameseMethod` owns that machinery (the two views, the branches, the EMA); a method adds its
heads, loss, view transform and defaults, and any diagnostics of its own (:meth:`diagnostics`). The
papers' sizes and momentum are in ``dssl.methods.byol`` and ``dssl.methods.simsiam``.

References:
    [0] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [1] SimSiam, 2020, https://arxiv.org/abs/2011.10566
    [2] BYOL, 2020, https://arxiv.org/abs/2006.07733
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dssl.methods.base import LossOutput, SSLMethod, ema_update, make_ema_target


class SiameseMethod(SSLMethod):
    """Paper B's [0] Siamese model. Online encoder + ``projector`` + optional ``predictor`` against a target
    branch; ``criterion``
    (p1, p2, t1, t2) -> loss compares each view's prediction with the other view's target projection.

    ``hparams`` must hold ``stop_gradient``, ``ema_target``, ``momentum`` and ``target_optimized``.
    ``local_modules``: the predictor (paper B's "keep local knowledge", FedU / FedEMA). The EMA target is
    per-client memory (``target_sources``): every strategy keeps it on the client. ``share_target(True)``
    makes the target branch the online network itself until ``share_target(False)`` (paper B's code in a
    client's first round); ``copy_online_to_target`` then leaves the target as that network ended.
    """

    local_modules = ("predictor",)
    target_sources = {"target_encoder": "encoder", "target_projector": "projector"}

    def __init__(self, encoder: nn.Module, hparams: dict[str, Any], *, projector: nn.Module,
                 predictor: nn.Module | None, criterion: nn.Module, transform: nn.Module) -> None:
        super().__init__(encoder, hparams)
        self.momentum = hparams["momentum"]
        if not 0.0 <= self.momentum <= 1.0:
            raise ValueError(f"momentum must be in [0, 1] (1: a frozen target), got {self.momentum}")
        self.stop_gradient = bool(hparams["stop_gradient"])
        self.projector = projector
        self.predictor = predictor
        # Under no stop-gradient the gradient reaches the target copies too: they stay trainable (the
        # optimiser steps them, then the EMA pulls them toward the online network), unless the target
        # is kept out of the optimiser (paper B's code).
        self.target_encoder, self.target_projector = make_ema_target(
            encoder, projector, hparams["ema_target"],
            trainable=not self.stop_gradient and bool(hparams["target_optimized"]))
        self.criterion = criterion
        self.transform = transform
        self.target_is_online = False

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
        if self.target_encoder is None or self.target_is_online:
            return z1, z2
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.stop_gradient):
            return self.target_projector(self.target_encoder(x1)), self.target_projector(self.target_encoder(x2))

    def diagnostics(self, z1: torch.Tensor) -> dict[str, torch.Tensor]:
        """Detached scalars logged beside the loss, from view 1's projection; none by default."""
        del z1
        return {}

    def share_target(self, shared: bool) -> None:
        """While ``shared``, the target branch is the online network itself (no EMA moves a separate copy)."""
        self.target_is_online = bool(shared) and self.target_encoder is not None

    @torch.no_grad()
    def copy_online_to_target(self) -> None:
        """target <- online (parameters and BN statistics): the target as a shared one ended."""
        if self.target_encoder is not None:
            self.target_encoder.load_state_dict(self.encoder.state_dict())
            self.target_projector.load_state_dict(self.projector.state_dict())

    def update_target(self, momentum: float) -> None:
        """target <- momentum * target + (1 - momentum) * online (encoder and projector), if EMA."""
        if self.target_encoder is not None and not self.target_is_online:
            ema_update(self.target_encoder, self.encoder, momentum)
            ema_update(self.target_projector, self.projector, momentum)

    def after_optimizer_step(self) -> None:
        self.update_target(self.momentum)

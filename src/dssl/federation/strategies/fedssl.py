"""FedSSL: paper B's framework for federated Siamese SSL, with its design space as options.

Zhuang, Wen & Zhang, "Divergence-aware Federated Self-Supervised Learning" (ICLR 2022) [0], Section 3-4.
Each round a client trains its Siamese model (online encoder + projector, a predictor for BYOL /
SimSiam, an EMA target for BYOL / MoCo), uploads part of it, the server averages the uploads and
the global model replaces part of the client's model. The options are the questions paper B studies
(names as in its code, applications/fedssl of EasyFL):

``aggregate_encoder``  which of the client's encoders (encoder + projector) is uploaded and averaged
                       into the global encoder: ``online`` (default), ``target`` (the EMA target,
                       sent in the online network's place), or ``both`` (each averaged on its own).
``update_encoder``     which local networks the global encoder replaces: ``online`` (default),
                       ``target``, ``both``, ``none`` (keep both local), or ``ema``: the local
                       online network becomes ``encoder_ema * local + (1 - encoder_ema) * global``.
``update_predictor``   ``global`` (default: the averaged predictor replaces the local one) or
                       ``local`` (the client keeps its own; FedU [1] chooses between them by a divergence).
``first_round_target`` ``copy`` (default): a client's first target is a copy of the online network it
                       receives; ``online``: paper B's code, where in a client's first round the target
                       *is* its online network (one object: the EMA moves nothing, and without
                       stop-gradient the gradient of both branches reaches the online weights), and the
                       target then keeps that network as the round ended. It decides what paper B's code
                       means by its no-stop-gradient and no-EMA ablations (``dssl.methods.siamese``).

The predictor is always uploaded with the encoder ("the client uploads its online network (and
predictor)"). The method's other switches (``predictor``, ``stop_gradient``, ``ema_target``, MoCo's
``version``) are its hyper-parameters. Per-client memory other than the target (MoCo's queue) is
never uploaded. A client's first participation takes every network from the global model (paper B's
code: the target starts as the global encoder) and the method's initial memory.

Paper B's setting [0] (its code's defaults): 5 clients all training every round, 100 rounds, 5 local epochs,
batch 128, SGD lr 0.032 momentum 0.9 weight decay 5e-4, a CIFAR ResNet-18 with BYOL's heads at 512-4096-2048
(projector) and 2048-4096-2048 (predictor), target EMA 0.99; the server weights clients by data size. This
code's default ``aggregation: uniform`` differs from that weighting (``aggregation: data_size`` is paper B's).

References:
    [0] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [1] FedU, 2021, https://arxiv.org/abs/2108.06492
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from dssl.config.strategies._base import AggregationConfig
from dssl.config.strategies.fedssl import FedSSLConfig
from dssl.federation.state import StateDict, snapshot
from dssl.federation.strategies.base import LOCAL_MODEL, ClientContext, Strategy, Upload


@torch.no_grad()
def blend(local: torch.Tensor, global_: torch.Tensor, mu: float) -> torch.Tensor:
    """mu * local + (1 - mu) * global (paper B's FedEMA update, Eq. 3)."""
    return global_.lerp(local, mu)


class FedSSL(Strategy):
    """Paper B's [0] FedSSL framework; the defaults (online / online / global) are FedAvg of the online
    network and predictor with the EMA target kept on the client (FedBYOL, FedSimSiam, ...).

    ``design`` holds the design choices the round follows: the config itself for ``fedssl``; a subclass
    whose config does not offer them (FedU, FedEMA) passes the choices it fixes.
    """

    def __init__(self, config: AggregationConfig, design: FedSSLConfig | None = None) -> None:
        super().__init__(config)
        self.design: FedSSLConfig = design if design is not None else config
        if self.design.update_encoder == "ema" and self.design.encoder_ema is None:
            raise ValueError("update_encoder 'ema' needs encoder_ema in [0, 1], got None")
        if self.design.update_encoder != "ema" and self.design.encoder_ema is not None:
            raise ValueError("encoder_ema is only used with update_encoder: ema")
        self.method: nn.Module | None = None   # with first_round_target: online, the method it toggles
        self.online_keys: tuple[str, ...] = ()
        self.predictor_keys: tuple[str, ...] = ()
        self.target_keys: tuple[str, ...] = ()
        self.param_keys: frozenset[str] = frozenset()
        self.online_to_target: dict[str, str] = {}
        self.replaced: dict[str, str] = {}  # local key -> the global key that replaces it
        self.kept_keys: tuple[str, ...] = ()

    # -- set-up ---------------------------------------------------------------------------------

    def setup(self, method: nn.Module) -> None:
        keys = list(method.state_dict())
        online, predictor, target = (method.part_keys(p) for p in ("online", "predictor", "target"))
        self.online_keys, self.predictor_keys, self.target_keys = tuple(online), tuple(predictor), tuple(target)
        self.param_keys = frozenset(name for name, _ in method.named_parameters())
        self.target_sources = {k: method.online_key_of(k) for k in target}
        self.online_to_target = {o: t for t, o in self.target_sources.items()}
        self._check_method(method)
        aggregate, update = self.design.aggregate_encoder, self.design.update_encoder
        shared = set(predictor) | set(online)
        if aggregate == "both":
            shared |= set(target)
        self.shared_keys = tuple(k for k in keys if k in shared)
        self.local_keys = frozenset(k for k in keys if k not in shared)
        self.initial_local = snapshot(method, [k for k in keys if k in self.local_keys])
        self.replaced = self.replacement(update)
        self.kept_keys = tuple(k for k in keys if k not in self.replaced or update == "ema")
        self.round_memory = tuple(method.round_memory_keys())

    def _check_method(self, method: nn.Module) -> None:
        if self.design.first_round_target == "online":
            if not self.target_keys or not hasattr(method, "share_target"):
                raise ValueError(f"first_round_target 'online' shares a Siamese method's EMA target with its online "
                                 f"network; method {method.name!r} has none (use byol, or simsiam with ema_target)")
            self.method = method
        needs_target = (self.design.aggregate_encoder in ("target", "both")
                        or self.design.update_encoder in ("target", "both"))
        if needs_target and not self.target_keys:
            raise ValueError(
                f"method {method.name!r} has no EMA target network, which aggregate_encoder="
                f"{self.design.aggregate_encoder!r} / update_encoder={self.design.update_encoder!r} "
                "need; use byol, moco, or simsiam with ema_target: true")
        missing = [k for k in self.online_keys if self.target_keys and k not in self.online_to_target]
        if needs_target and missing:
            raise ValueError(f"online keys without a target counterpart: {missing[:5]}")

    def target_source(self, target_key: str) -> str:
        """The global key a local target tensor is replaced from: the averaged target when targets
        are aggregated on their own (``both``), otherwise the global encoder."""
        return target_key if self.design.aggregate_encoder == "both" else self.target_sources[target_key]

    def replacement(self, update: str) -> dict[str, str]:
        """local key -> global key for everything the global model replaces (or blends, ``ema``)."""
        replaced: dict[str, str] = {}
        if update in ("online", "both", "ema"):
            replaced.update({k: k for k in self.online_keys})
        if update in ("target", "both"):
            replaced.update({k: self.target_source(k) for k in self.target_keys})
        if self.design.update_predictor == "global":
            replaced.update({k: k for k in self.predictor_keys})
        return replaced

    # -- client side ------------------------------------------------------------------------------

    def client_update_start(self, client_id: int, global_state: Mapping[str, torch.Tensor],
                            local_state: dict, ctx: ClientContext) -> Mapping[str, torch.Tensor]:
        kept = local_state.get(LOCAL_MODEL)
        if self.method is not None:   # first_round_target: online
            self.method.share_target(kept is None)
        if kept is None:
            return self.first_start(global_state)
        start = dict(kept)
        for key, source in self.replaced.items():
            start[key] = global_state[source]
        if self.design.update_encoder == "ema":
            self.blend_into(start, kept, global_state, self.online_keys, self.design.encoder_ema)
        return self.restart_round_memory(start)

    def first_start(self, global_state: Mapping[str, torch.Tensor]) -> StateDict:
        """A client's first start: every network from the global model, memory from the initial one."""
        start = {**self.initial_local, **global_state}
        for key in self.target_keys:
            start[key] = global_state[self.target_source(key)]
        return start

    def blend_into(self, start: dict, local: Mapping[str, torch.Tensor], global_state: Mapping[str, torch.Tensor],
                   keys: tuple[str, ...], mu: float) -> None:
        """Parameters of ``keys``: mu * local + (1 - mu) * global; buffers (BN statistics) stay the
        global ones, as paper B's code moves parameters only."""
        for key in keys:
            if key in self.param_keys:
                start[key] = blend(local[key], global_state[key], mu)

    def client_upload(self, client_id: int, method: nn.Module, local_state: dict,
                      ctx: ClientContext) -> Upload:
        if getattr(method, "target_is_online", False):   # a shared target leaves as the online network ended
            method.copy_online_to_target()
            method.share_target(False)
        local_state[LOCAL_MODEL] = snapshot(method, self.kept_keys)
        state = snapshot(method, self.shared_keys)
        if self.design.aggregate_encoder == "target":  # the target is sent in the online's place
            own = method.state_dict()
            for key in self.online_keys:
                state[key] = own[self.online_to_target[key]].detach().clone()
        return Upload(client_id, ctx.data.num_samples, state, model_index=ctx.model_index)

    def state_dict(self) -> dict[str, Any]:
        return {}

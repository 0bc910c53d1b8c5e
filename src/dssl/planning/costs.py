"""What a model costs per image and per stored state, measured on the real method, backbone and strategy.

- FLOPs per image, counted by ``torch.utils.flop_counter`` (multiply-adds count two): one training step of
  the method (its views, online and target networks, loss, backward), the encoder's forward pass and its
  forward + backward (fine-tuning). Attention runs on PyTorch's math kernel while counting, so its matrix
  products are counted (the fused kernels have no FLOP formula on every device). Elementwise work, data
  augmentation and optimiser steps are not FLOPs here. The model runs on the ``meta`` device (shapes only,
  no arithmetic: seconds instead of a minute at 224 px), or at batch 2 on the CPU where its code reads a
  value, which meta tensors do not have.
- Bytes of the tensors a run stores: the global models a strategy keeps, one client's local state after it
  trained (``client_states``), a DecL client's row of shared tensors, the saved weights. Tensor bytes only:
  ``torch.save`` adds well under 0.1 % (``benchmarks/checkpoint_bytes.py`` measures both).

Counts are cached on disk (``$DSSL_CACHE_DIR/plan-costs.json``, default ``~/.cache/dssl``), keyed by what
was measured, the torch version and the source of the methods, backbones and strategies and of the specs
declaring their defaults (``dssl.config.methods``, ``dssl.config.backbones``, ``dssl.config.strategies``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

CACHE_ENV = "DSSL_CACHE_DIR"
CACHE_FILE = "plan-costs.json"
COUNT_BATCH = 2   # BatchNorm in train mode needs two samples; FLOPs are per image
CODE_FOLDERS = ("methods", "models", "federation/strategies", "config/methods", "config/backbones",
                "config/strategies")


@dataclass(frozen=True)
class EncoderCosts:
    forward: float        # FLOPs per image of a forward pass
    train: float          # FLOPs per image of a forward and backward pass (without a head)
    feature_dim: int
    bytes: int            # its weights (encoder.pt)
    batchnorm: bool       # has BatchNorm layers (re-estimated on the downstream set before evaluation)


@dataclass(frozen=True)
class ModelCosts:
    train: float          # FLOPs per image of one training step of the method
    bytes: int            # the whole method's weights (model.pt)
    encoder: EncoderCosts
    counted_on: str       # "meta" or "cpu"


@dataclass(frozen=True)
class StateCosts:
    """A strategy's stored tensors with one model: FL's global models (all of them, e.g. FeatARC's
    clusters), one client's local state after it trained (0: it keeps none), and one DecL client's row of
    shared tensors (integer tensors held as float64 for gossip, ``state.StackedStates``)."""

    global_bytes: int
    client_bytes: int
    row_bytes: int


def count_flops(run: Callable[[], Any]) -> int:
    """FLOPs ``run()`` performs (``torch.utils.flop_counter``; attention on the math kernel)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
        run()
    return counter.get_total_flops()


def tensor_bytes(value: Any) -> int:
    """Bytes of the tensors in ``value`` (nested dicts, lists and tuples)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, Mapping):
        return sum(tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    return 0


def on_meta_else_cpu(measure: Callable[[str], Any]) -> tuple[Any, str]:
    """``measure(device)`` on the meta device, or on the CPU when the code reads a value (``.item()``)."""
    try:
        return measure("meta"), "meta"
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as error:
        if "meta" not in str(error).lower():
            raise
        return measure("cpu"), "cpu"


_LAST_BUILT: dict[str, Any] = {}


def build_method(spec: Mapping[str, Any], image_size: int, in_chans: int, device: str):
    """The model of a params ``models`` entry, built on ``device`` (in train mode). The last one built is
    kept: a model's FLOPs and its states under each strategy are measured one after another, and no
    measurement changes its weights."""
    import torch

    from dssl.methods import create_method

    key = json.dumps([dict(spec), image_size, in_chans, device], sort_keys=True, default=str)
    if key not in _LAST_BUILT:
        with torch.device(device):
            torch.manual_seed(0)
            method = create_method(spec["method"], spec["backbone"], image_size, in_chans,
                                   **(spec.get("hparams") or {}))
        _LAST_BUILT.clear()
        _LAST_BUILT[key] = method
    return _LAST_BUILT[key].train()


def method_flops(method, image_size: int, in_chans: int) -> float:
    """FLOPs per image of one training step of ``method`` (on its own device)."""
    import torch

    device = next(method.parameters()).device
    images = torch.rand(COUNT_BATCH, in_chans, image_size, image_size, device=device)
    return count_flops(lambda: method.training_loss(images)["loss"].backward()) / COUNT_BATCH


def encoder_costs(encoder, image_size: int, in_chans: int) -> EncoderCosts:
    import torch

    device = next(encoder.parameters()).device
    images = torch.rand(COUNT_BATCH, in_chans, image_size, image_size, device=device)
    encoder.train()
    with torch.no_grad():
        forward = count_flops(lambda: encoder(images)) / COUNT_BATCH
    train = count_flops(lambda: encoder(images).sum().backward()) / COUNT_BATCH
    batchnorm = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in encoder.modules())
    return EncoderCosts(forward, train, int(encoder.feature_dim), tensor_bytes(encoder.state_dict()), batchnorm)


def model_costs(spec: Mapping[str, Any], image_size: int, in_chans: int, cache: CostCache | None = None) -> ModelCosts:
    """FLOPs and bytes of a params ``models`` entry at ``image_size``."""
    def measure(device: str) -> dict:
        method = build_method(spec, image_size, in_chans, device)
        train = method_flops(method, image_size, in_chans)
        return {"train": train, "bytes": tensor_bytes(method.state_dict()),
                "encoder": asdict(encoder_costs(method.encoder, image_size, in_chans))}

    key = {"what": "model", "spec": dict(spec), "size": image_size, "in_chans": in_chans}
    found = _cached(cache, key, measure)
    return ModelCosts(found["train"], found["bytes"], EncoderCosts(**found["encoder"]), found["counted_on"])


def backbone_costs(backbone: str, image_size: int, in_chans: int, cache: CostCache | None = None) -> EncoderCosts:
    """FLOPs and bytes of a randomly initialised backbone (``evaluate_random``)."""
    def measure(device: str) -> dict:
        import torch

        from dssl.models import create_backbone

        with torch.device(device):
            encoder = create_backbone(backbone, image_size, in_chans)
        return asdict(encoder_costs(encoder, image_size, in_chans))

    found = _cached(cache, {"what": "backbone", "backbone": backbone, "size": image_size, "in_chans": in_chans},
                    measure)
    return EncoderCosts(**{k: v for k, v in found.items() if k != "counted_on"})


def state_costs(spec: Mapping[str, Any], strategy: Mapping[str, Any], image_size: int, in_chans: int,
                cache: CostCache | None = None) -> StateCosts:
    """Stored bytes of a model under a strategy: its hooks run for one client that takes part twice
    (without training), and what the client then keeps is its local state."""
    def measure(device: str) -> dict:
        return asdict(_probe_states(build_method(spec, image_size, in_chans, device), strategy))

    key = {"what": "states", "spec": dict(spec), "strategy": dict(strategy), "size": image_size,
           "in_chans": in_chans}
    found = _cached(cache, key, measure)
    return StateCosts(found["global_bytes"], found["client_bytes"], found["row_bytes"])


def _probe_states(method, strategy_spec: Mapping[str, Any]) -> StateCosts:
    import numpy as np
    import torch

    from dssl.federation import ClientData
    from dssl.federation.state import snapshot
    from dssl.federation.strategies.base import ClientContext
    from dssl.pipeline.pretrain import build_strategy

    strategy, _ = build_strategy(dict(strategy_spec))
    strategy.setup(method)
    shared = snapshot(method, strategy.shared_keys)
    global_states = strategy.initial_global_states(shared)
    device = next(method.parameters()).device
    local_state: dict = {}
    for participation in range(2):
        ctx = ClientContext(0, participation, 2, participation, ClientData(None, np.zeros(0, dtype=np.int64)),
                            device, torch.Generator())
        strategy.client_update_start(0, global_states[0], local_state, ctx)
        strategy.client_upload(0, method, local_state, ctx)
    row = sum(t.numel() * (t.element_size() if t.is_floating_point() else 8) for t in shared.values())
    return StateCosts(tensor_bytes(global_states), tensor_bytes(local_state), row)


# -- the cache --------------------------------------------------------------------------------------


def cache_file() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "dssl") / CACHE_FILE


class CostCache:
    """Measured costs by key, read from and written back to ``cache_file()`` (a damaged file is ignored)."""

    def __init__(self, path: Path | None = None):
        self.path = path or cache_file()
        self.entries: dict[str, dict] = {}
        self.changed = False
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(self.path.read_text())
            if isinstance(loaded, dict):
                self.entries = loaded

    def save(self) -> None:
        """Write the entries back (atomically); a read-only place only costs the next run a recount."""
        if not self.changed:
            return
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            temporary.write_text(json.dumps(self.entries, sort_keys=True, indent=1) + "\n")
            os.replace(temporary, self.path)
            self.changed = False


def _cached(cache: CostCache | None, key: dict, measure: Callable[[str], dict]) -> dict:
    text = _key(key)
    if cache is not None and text in cache.entries:
        return cache.entries[text]
    found, device = on_meta_else_cpu(measure)
    found = {**found, "counted_on": device}
    if cache is not None:
        cache.entries[text] = found
        cache.changed = True
    return found


def _key(key: dict) -> str:
    import torch

    return hashlib.sha256(json.dumps({**key, "torch": torch.__version__, "code": code_digest()},
                                     sort_keys=True, default=str).encode()).hexdigest()


_CODE_DIGEST: str | None = None


def code_digest() -> str:
    """SHA-256 of the methods', models' and strategies' source: a change to them invalidates the cache."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        package = Path(__file__).resolve().parents[1]
        digest = hashlib.sha256()
        for folder in CODE_FOLDERS:
            for path in sorted((package / folder).rglob("*.py")):
                digest.update(path.relative_to(package).as_posix().encode())
                digest.update(path.read_bytes())
        _CODE_DIGEST = digest.hexdigest()
    return _CODE_DIGEST

"""Local training of one client: E epochs over its samples with seeded shuffling and augmentation.

Optimizer state is fresh for every local training call (every client, every round): momentum and
Adam moments never travel between rounds or clients, and only model tensors are exchanged. Both
papers' released code does the same: paper A's builds a new optimizer inside each client's training
call, paper B's (EasyFL FedSSL) in every round's ``pretrain_setup``. One optimizer object is built per
simulator and its state is cleared before each client instead: equivalent to a new one, and cheaper.

One optimisation step lives in ``TrainStep``: plain fp32 by default, with opt-in bf16 autocast,
channels-last memory format and ``torch.compile`` (``StepOptions``) for accelerators.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Protocol

import numpy as np
import torch
from torch import nn

from dssl.data.batches import UNIT_RANGE, BufferPool, pool_size, read_batches

LR_REFERENCE_BATCH = 256  # paper A: lr = base_lr * batch_size / 256
# Batches read ahead by a background thread while the step runs (``dssl.data.batches.read_batches``).
# 0: on a CPU device the reader and the step compete for the same cores and the GIL, which made
# small-image training up to twice as slow; the batch is read when the step asks for it.
READ_AHEAD = 0


class ImageSource(Protocol):
    """What local training needs from ``dssl.data``'s ImageSet."""

    def __len__(self) -> int: ...

    def get_batch(self, indices: np.ndarray) -> torch.Tensor: ...


Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]
LossFn = Callable[[torch.Tensor], Mapping[str, torch.Tensor]]


@dataclass
class ClientData:
    """One client's view of the shared image set: its sample indices and its feature-skew augmentation.

    ``augment`` is paper A's per-client augmentation for feature non-IID (``dssl.data``'s
    ClientAugmentation), applied to the float batch before the SSL method draws its own views.
    """

    images: ImageSource
    indices: np.ndarray
    augment: Augment | None = None

    @property
    def num_samples(self) -> int:
        return int(len(self.indices))


def clients_from_partition(images: ImageSource, partition: Any) -> list[ClientData]:
    """One ``ClientData`` per client of a ``dssl.data`` Partition (feature skew included)."""
    augments = partition.client_augment or [None] * partition.num_clients
    if augments[0] is not None:
        from dssl.data.augment import ClientAugmentation

        augments = [ClientAugmentation(params) for params in augments]
    return [ClientData(images, np.asarray(indices, dtype=np.int64), augment)
            for indices, augment in zip(partition.client_indices, augments)]


@dataclass(frozen=True)
class OptimizerConfig:
    """Local optimizer. ``lr = base_lr * batch_size / 256`` (paper A, appendix A.2).

    Paper A: AdamW betas (0.9, 0.95), wd 0.05 for ViT/MAE (the code exempts biases and norm weights
    from decay, ``exclude_norm_bias_from_decay=True``); SGD momentum 0.9, wd 1e-4 for CNNs (decay on
    every parameter). Paper B: SGD lr 0.032 at batch 128 (base_lr 0.064), wd 5e-4, cosine over rounds.
    """

    name: str = "sgd"
    base_lr: float = 0.05
    momentum: float = 0.9
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 1e-4
    exclude_norm_bias_from_decay: bool = False
    schedule: str = "constant"  # constant | cosine (over rounds)

    def lr(self, batch_size: int) -> float:
        return self.base_lr * batch_size / LR_REFERENCE_BATCH


OPTIMIZERS = ("sgd", "adamw", "adam")   # adam: L2-coupled weight decay (Dec-SSL's FeatARC code)
SCHEDULES = ("constant", "cosine")


def build_optimizer(model: nn.Module, config: OptimizerConfig, lr: float) -> torch.optim.Optimizer:
    """The optimizer over the model's trainable parameters (frozen ones, e.g. EMA targets, excluded)."""
    if config.name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {config.name!r}; known: {', '.join(OPTIMIZERS)}")
    if config.schedule not in SCHEDULES:
        raise ValueError(f"unknown lr schedule {config.schedule!r}; known: {', '.join(SCHEDULES)}")
    groups = _param_groups(model, config)
    if config.name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=config.momentum)
    if config.name == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=tuple(config.betas))
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(config.betas))


def _param_groups(model: nn.Module, config: OptimizerConfig) -> list[dict]:
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        # timm's add_weight_decay rule, as in MAE and paper A's code: 1-D tensors and biases.
        exempt = config.exclude_norm_bias_from_decay and (param.ndim <= 1 or name.endswith(".bias"))
        (no_decay if exempt else decay).append(param)
    groups = [{"params": decay, "weight_decay": config.weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups


def round_lr(config: OptimizerConfig, batch_size: int, round_index: int, num_rounds: int) -> float:
    """The local learning rate of a round: constant (paper A's code) or cosine over rounds (paper B)."""
    lr = config.lr(batch_size)
    if config.schedule == "cosine":
        lr *= 0.5 * (1.0 + math.cos(math.pi * round_index / num_rounds))
    return lr


def reset_optimizer(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Fresh optimizer state (as a newly built optimizer) at learning rate ``lr``."""
    optimizer.state.clear()
    for group in optimizer.param_groups:
        group["lr"] = lr


def batch_bounds(num_samples: int, batch_size: int, drop_last: bool) -> list[tuple[int, int]]:
    """[start, end) of each batch of one epoch.

    ``drop_last`` drops the trailing partial batch like the reference code's DataLoader, except that
    a client smaller than one batch still trains on one batch of all its samples (a DataLoader would
    skip it). A trailing batch of a single sample is always dropped: batch norm cannot train on it.
    """
    full = num_samples // batch_size
    bounds = [(i * batch_size, (i + 1) * batch_size) for i in range(full)]
    rest = num_samples - full * batch_size
    if rest > 1 and (not drop_last or full == 0):
        bounds.append((full * batch_size, num_samples))
    return bounds


PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class StepOptions:
    """How one training step runs; the defaults are the plain fp32 step every result was produced with.

    - ``precision``: ``fp32``, or ``bf16``: forward and loss under ``torch.autocast(device_type,
      torch.bfloat16)``; backward and the optimizer step stay outside autocast, parameters and
      optimizer state stay fp32. bf16 keeps fp32's exponent range, so no loss scaling is needed.
      Works on CPU too (slower there unless the CPU has bf16 instructions).
    - ``channels_last``: model and 4-D input batches in ``torch.channels_last`` memory format, the
      layout GPU convolution kernels (tensor cores) prefer. Only 4-D conv weights and inputs change;
      for a ViT that is just the patch embedding, so it is effectively a no-op there.
    - ``compile``: ``torch.compile`` (inductor) of the modules the loss runs through; see
      ``TrainStep``. On CPU inductor needs a C++ compiler. A failure raises ``CompileError``.
    """

    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False

    def validate(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; known: {', '.join(PRECISIONS)}")

    @property
    def plain(self) -> bool:
        """True for the default fp32, contiguous, eager step."""
        return self == StepOptions()


class CompileError(RuntimeError):
    """``torch.compile`` could not compile (or recompile) the training step."""


class TrainStep:
    """One optimisation step of ``model`` with ``optimizer``, under ``options`` (``StepOptions``).

    Built once per simulator: it converts the model to channels-last and compiles it in place when
    asked, so the state-dict keys stay as they are (snapshots, aggregation and checkpoints see no
    difference). ``step(batch, loss_fn)`` runs forward + loss, backward, the optimizer step and the
    method's ``after_optimizer_step``, and returns the loss dict.

    ``compile`` compiles, with ``nn.Module.compile`` (in place), each direct submodule of the model
    that holds parameters (encoder, projector, predictor, decoder, EMA target). For a ViT encoder it
    compiles each transformer block instead: MAE runs the blocks on visible tokens without calling
    the encoder's ``forward``, and identical blocks share one compiled graph. The views' augmentation
    (seeded ``torch.Generator`` draws, which dynamo cannot trace) stays eager. Compilation is lazy: a
    compile error surfaces at the first step (or at a recompile) and is raised as ``CompileError``;
    dynamo is told not to fall back to eager silently, neither on errors nor at its recompile limit.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 options: StepOptions = StepOptions()) -> None:
        options.validate()
        self.model = model
        self.optimizer = optimizer
        self.options = options
        self.device_type = next(model.parameters()).device.type
        if options.channels_last:
            # Module.to keeps the Parameter objects (only their data changes), so the optimizer,
            # already built over them, still holds the right tensors.
            model.to(memory_format=torch.channels_last)
        self.compiled: list[nn.Module] = _compile_in_place(model, self.device_type) if options.compile else []

    @property
    def plain(self) -> bool:
        """True when the step is the plain fp32 eager one (no conversion, no autocast, no compile)."""
        return self.options.plain

    def __call__(self, batch: torch.Tensor, loss_fn: LossFn) -> Mapping[str, torch.Tensor]:
        if self.options.channels_last and batch.ndim == 4:
            batch = batch.contiguous(memory_format=torch.channels_last)
        with self._compile_guard():
            with self._autocast():
                out = loss_fn(batch)
            self.optimizer.zero_grad(set_to_none=True)
            # Backward outside autocast (its ops take the forward's dtypes); inductor compiles the
            # backward graph lazily here, hence inside the guard.
            out["loss"].backward()
        self.optimizer.step()
        self.model.after_optimizer_step()
        return out

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.options.precision == "bf16":
            return torch.autocast(device_type=self.device_type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def _compile_guard(self) -> Iterator[None]:
        if not self.options.compile:
            yield
            return
        import torch._dynamo

        # Never swap in eager code behind the user's back: errors and recompile-limit hits raise.
        with torch._dynamo.config.patch(suppress_errors=False, fail_on_recompile_limit_hit=True):
            try:
                yield
            except Exception as exc:
                if type(exc).__module__.startswith(("torch._dynamo", "torch._inductor")):
                    raise CompileError(_compile_message(exc, self.device_type)) from exc
                raise


def _compile_targets(model: nn.Module) -> list[nn.Module]:
    targets: list[nn.Module] = []
    for child in model.children():
        if not any(True for _ in child.parameters()):
            continue  # criterion, view transform: nothing to gain, and the transform draws from generators
        blocks = getattr(child, "blocks", None)
        # Identical transformer blocks compiled one by one share a single compiled graph (regional
        # compilation): half the cold-start time of compiling the stack for Tiny-ViT's 9 blocks.
        targets.extend(blocks.children() if isinstance(blocks, nn.Module) else [child])
    return targets or [model]


def _compile_in_place(model: nn.Module, device_type: str) -> list[nn.Module]:
    if device_type == "cpu":
        _require_cpp_compiler()
    targets = _compile_targets(model)
    for module in targets:
        module.compile()
    return targets


def _require_cpp_compiler() -> None:
    """Fail at set-up, not at the first step, when inductor has no C++ compiler for CPU kernels."""
    try:
        from torch._inductor import cpp_builder

        cpp_builder.get_cpp_compiler()
    except Exception as exc:
        raise CompileError(_compile_message(exc, "cpu")) from exc


def _compile_message(exc: BaseException, device_type: str) -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    hint = ("On CPU, inductor needs a working C++ compiler (g++; see torch._inductor.config.cpp.cxx)"
            if device_type == "cpu" else "On GPU, inductor needs Triton for the device")
    return (f"torch.compile of the training step failed: {type(exc).__name__}: {first_line}. "
            f"{hint}; the cause is chained below. Set compile: false to train without compiling.")


@dataclass
class LocalResult:
    """What one client's local training produced (losses are means over its steps)."""

    steps: int
    images: int
    losses: dict[str, float]


def train_client(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: ClientData,
    loss_fn: LossFn,
    *,
    epochs: int,
    batch_size: int,
    drop_last: bool,
    shuffle_generator: torch.Generator,
    augment_generator: torch.Generator,
    device: torch.device,
    step: TrainStep | None = None,
) -> LocalResult:
    """E local epochs of SGD-type steps on ``loss_fn`` (FedAvg's ClientUpdate; paper A Alg. 1, line 5).

    ``model`` is an SSL method (``dssl.methods``): its ``after_optimizer_step`` runs after every step
    (EMA targets). Loss values are summed on the device and read once at the end: no host sync per batch.
    ``step`` is the simulator's ``TrainStep`` over ``model`` and ``optimizer`` (None: the plain step).
    """
    if step is None:
        step = TrainStep(model, optimizer)
    elif step.model is not model or step.optimizer is not optimizer:
        raise ValueError("step must wrap the same model and optimizer that train_client is given")
    model.train()
    bounds = batch_bounds(data.num_samples, batch_size, drop_last)
    sums: dict[str, torch.Tensor] = {}
    steps = images = 0
    # On a CPU device the float batch is made in the reader's reused buffers (a fresh 37 MiB batch
    # per step costs more in page faults than the conversion); on an accelerator uint8 travels and is
    # converted there (a copy from pageable memory returns once the source is staged, so the buffer
    # may be reused at once).
    on_cpu = device.type == "cpu"
    pool = BufferPool(pool_size(READ_AHEAD))
    for _ in range(epochs):
        order = data.indices[torch.randperm(data.num_samples, generator=shuffle_generator).numpy()]
        batches = [order[start:end] for start, end in bounds]
        read = read_batches(data.images, batches, normalisation=UNIT_RANGE if on_cpu else None,
                            workers=READ_AHEAD, pool=pool)
        for indices, pixels in zip(batches, read):
            batch = pixels if on_cpu else pixels.to(device, non_blocking=True).float().div_(255.0)
            if data.augment is not None:
                batch = data.augment(batch, augment_generator)
            out = step(batch, loss_fn)
            del pixels, batch  # the pool reuses a buffer once nothing refers to it
            _accumulate(sums, out)
            steps += 1
            images += len(indices)
    losses = {key: float(total) / steps for key, total in sums.items()} if steps else {}
    return LocalResult(steps=steps, images=images, losses=losses)


def load_client_batch(data: ClientData, indices: np.ndarray, generator: torch.Generator,
                      device: torch.device) -> torch.Tensor:
    """Images ``indices`` of a client as its training sees them: [0, 1] floats on ``device``, with the
    client's feature-skew augmentation (drawn from ``generator``). Strategies that look at a client's
    data outside its training steps use it (Orchestra fills its memory with it)."""
    batch = data.images.get_batch(indices).to(device, non_blocking=True).float().div_(255.0)
    return data.augment(batch, generator) if data.augment is not None else batch


def _accumulate(sums: dict[str, torch.Tensor], out: Mapping[str, torch.Tensor]) -> None:
    for key, value in out.items():
        if isinstance(value, torch.Tensor) and value.ndim == 0:
            value = value.detach()
            if value.dtype in (torch.bfloat16, torch.float16):
                value = value.float()  # a bf16 sum over many steps would lose the small terms
            sums[key] = sums[key] + value if key in sums else value.clone()

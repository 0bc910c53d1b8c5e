"""Local training of one client: E epochs over its samples with seeded shuffling and augmentation.

Optimizer state is fresh for every local training call (every client, every round): momentum and
Adam moments never travel between rounds or clients, and only model tensors are exchanged. Both
papers' released code does the same: paper A's builds a new optimizer inside each client's training
call, paper B's (EasyFL FedSSL) in every round's ``pretrain_setup``. One optimizer object is built per
simulator and its state is cleared before each client instead: equivalent to a new one, and cheaper.

One optimisation step lives in ``dssl.training.step.TrainStep``: plain fp32 by default, with opt-in
bf16 autocast, channels-last memory format and ``torch.compile`` (``StepOptions``) for accelerators.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

import numpy as np
import torch
from torch import nn

from dssl.data.batches import UNIT_RANGE, BufferPool, DeviceBatches, pool_size, read_batches
from dssl.training.options import PRECISIONS, StepOptions  # noqa: F401  (the step's vocabulary, re-exported)
from dssl.training.step import CompileError, LossFn, TrainStep  # noqa: F401

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

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "OptimizerConfig":
        """From a params recipe (``pretrain.optimizers.<family>``): YAML's ``betas`` list becomes a tuple."""
        values = dict(values)
        if "betas" in values:
            values["betas"] = tuple(values["betas"])
        return cls(**values)

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


@dataclass
class LocalResult:
    """What one client's local training produced (losses are means over its steps)."""

    steps: int
    images: int
    losses: dict[str, float]


@dataclass
class LocalProgress:
    """Where a client's local training stands after its first ``epochs`` epochs: the counts and the
    loss sums (device tensors, summed in the same order as a run never stopped, so the round's mean
    loss keeps its bits). An epoch checkpoint stores it beside the model, optimizer and generator
    states; ``train_client`` given it goes on with the next epoch."""

    epochs: int = 0
    steps: int = 0
    images: int = 0
    sums: dict[str, torch.Tensor] = field(default_factory=dict)


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
    start: LocalProgress | None = None,
    on_epoch_end: Callable[[LocalProgress], None] | None = None,
) -> LocalResult:
    """E local epochs of SGD-type steps on ``loss_fn`` (FedAvg's ClientUpdate; paper A Alg. 1, line 5).

    ``model`` is an SSL method (``dssl.methods``): its ``after_optimizer_step`` runs after every step
    (EMA targets). Loss values are summed on the device and read once at the end: no host sync per batch.
    ``step`` is the simulator's ``TrainStep`` over ``model`` and ``optimizer`` (None: the plain step).
    ``start``: the progress of an interrupted run, whose model, optimizer and generators the caller has
    restored (None: from the first epoch). ``on_epoch_end`` sees the progress after every epoch (the
    simulator's epoch checkpoints: a run that trains all its epochs in one round resumes mid-round).
    """
    if step is None:
        step = TrainStep(model, optimizer)
    elif step.model is not model or step.optimizer is not optimizer:
        raise ValueError("step must wrap the same model and optimizer that train_client is given")
    model.train()
    bounds = batch_bounds(data.num_samples, batch_size, drop_last)
    progress = start or LocalProgress()
    sums: dict[str, torch.Tensor] = dict(progress.sums)
    steps, images = progress.steps, progress.images
    # On a CPU device the float batch is made in the reader's reused buffers (a fresh 37 MiB batch
    # per step costs more in page faults than the conversion), read when the step asks for it. On an
    # accelerator a reader thread gathers uint8 pixels into pinned buffers while the step runs; they
    # travel without waiting and are converted (and resized) there (``DeviceBatches``).
    on_cpu = device.type == "cpu"
    pool = BufferPool(pool_size(READ_AHEAD)) if on_cpu else None
    for epoch in range(progress.epochs, epochs):
        order = data.indices[torch.randperm(data.num_samples, generator=shuffle_generator).numpy()]
        batches = [order[start:end] for start, end in bounds]
        if on_cpu:
            read = read_batches(data.images, batches, normalisation=UNIT_RANGE, workers=READ_AHEAD, pool=pool)
        else:
            read = DeviceBatches(data.images, device)(batches)
        for indices, batch in zip(batches, read):
            if data.augment is not None:
                batch = data.augment(batch, augment_generator)
            out = step(batch, loss_fn)
            del batch  # the pool reuses a buffer once nothing refers to it
            _accumulate(sums, out)
            steps += 1
            images += len(indices)
        if on_epoch_end is not None:
            on_epoch_end(LocalProgress(epoch + 1, steps, images, dict(sums)))
    losses = {key: float(total) / steps for key, total in sums.items()} if steps else {}
    return LocalResult(steps=steps, images=images, losses=losses)


def load_client_batch(data: ClientData, indices: np.ndarray, generator: torch.Generator,
                      device: torch.device) -> torch.Tensor:
    """Images ``indices`` of a client as its training sees them: [0, 1] floats on ``device``, with the
    client's feature-skew augmentation (drawn from ``generator``). Strategies that look at a client's
    data outside its training steps use it (Orchestra fills its memory with it)."""
    batch = next(iter(DeviceBatches(data.images, device)([indices])))
    return data.augment(batch, generator) if data.augment is not None else batch


def _accumulate(sums: dict[str, torch.Tensor], out: Mapping[str, torch.Tensor]) -> None:
    for key, value in out.items():
        if isinstance(value, torch.Tensor) and value.ndim == 0:
            value = value.detach()
            if value.dtype in (torch.bfloat16, torch.float16):
                value = value.float()  # a bf16 sum over many steps would lose the small terms
            sums[key] = sums[key] + value if key in sums else value.clone()

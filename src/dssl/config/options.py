"""The numeric options of params sections that no torch-free class of their own declares, each with its
range (``dssl.config.ranges``): training schedules and optimizer recipes, pretraining, improved graphs, and
the theory model. The section validators take their keys and ranges from here; methods and strategies declare
theirs in their specs (``dssl.config.methods``, ``dssl.config.strategies``), evaluation protocols in
``dssl.evaluation.configs``, datasets, partition schemes and topologies in their specs
(``dssl.data.dataset_specs``, ``dssl.data.partition_specs``, ``dssl.topology.topology_specs``).

Paper A: Chen et al., ICLR 2026 (https://openreview.net/forum?id=c3yt5VSZPQ); paper B: Zhuang et al.,
ICLR 2022 (https://arxiv.org/abs/2204.04385). Upper bounds are far above either paper's scale: they catch
a mistyped number (a batch of 10^9 images), not a bold experiment.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated

from dssl.config.ranges import Range

SEED = Range(0, 4_294_967_295)   # numpy's seed range
BATCH = Range(1, 65_536)
ROUNDS = Range(1, 100_000)
EPOCHS = Range(1, 100_000)
CLIENTS = Range(1, 100_000)


@dataclass(frozen=True)
class FLSchedule:
    """``pretrain.fl.train`` (and a strategy entry's ``train`` for FL cells). Paper A, Table 1: 100 rounds of
    5 of 100 clients, 2 local epochs, batch 128; Table 2: 200 rounds of 10 epochs; paper B: 100 rounds of
    all 5 clients, 5 local epochs, batch 128."""

    rounds: Annotated[int, ROUNDS]
    clients_per_round: Annotated[int, CLIENTS]
    local_epochs: Annotated[int, EPOCHS]
    batch_size: Annotated[int, BATCH]


@dataclass(frozen=True)
class DecLSchedule:
    """``pretrain.decl.train``. Paper A, Fig. 2: 25 rounds of 1 local epoch, batch 128."""

    rounds: Annotated[int, ROUNDS]
    local_epochs: Annotated[int, EPOCHS]
    batch_size: Annotated[int, BATCH]


@dataclass(frozen=True)
class CentralSchedule:
    """``pretrain.central.train`` and ``pretrain.local.train`` (stand-alone clients): epochs over the data."""

    epochs: Annotated[int, EPOCHS]
    batch_size: Annotated[int, BATCH]


@dataclass(frozen=True)
class OptimizerRecipe:
    """``pretrain.optimizers.<family>`` or a strategy entry's ``train.optimizer``; ``lr = base_lr * batch /
    256``. Paper A: AdamW base lr 1.5e-4, betas (0.9, 0.95), wd 0.05 (ViT); SGD momentum 0.9, wd 1e-4 (CNN).
    Paper B: SGD base lr 0.064 (0.032 at batch 128), wd 5e-4."""

    name: str
    base_lr: Annotated[float, Range(0.0, 100.0, low_open=True)]
    momentum: Annotated[float, Range(0.0, 1.0, high_open=True)]
    betas: Annotated[tuple[float, float], Range(0.0, 1.0, high_open=True)]
    weight_decay: Annotated[float, Range(0.0, 10.0)]
    exclude_norm_bias_from_decay: bool
    schedule: str


@dataclass(frozen=True)
class PretrainOptions:
    """``pretrain``: ``image_size``, the side in pixels every pretraining batch has (paper A: 32 for CIFAR,
    224 for ImageNet; paper B: 32)."""

    image_size: Annotated[int, Range(8, 1024)]


@dataclass(frozen=True)
class ImprovedGraphOptions:
    """``improved_graphs.<name>``: how many edges the greedy improvement adds."""

    edges: Annotated[int, Range(0, 10_000_000)]
    seed: Annotated[int, SEED]


@dataclass(frozen=True)
class TheoryOptions:
    """``theory``: paper A's linear model (Section 3.2) at finite d: N clients, c >= 2N classes, dimensions
    d >= c (the paper: N = Theta(d^(1/20)), mask ratio 0.75); ``local_clients`` and ``blas_threads`` may be
    null (all clients; the BLAS default)."""

    N: Annotated[int, Range(2, 10_000)]
    c: Annotated[int, Range(4, 1_000_000)]
    d_values: Annotated[tuple[int, ...], Range(1, 10_000_000)]
    seeds: Annotated[tuple[int, ...], SEED]
    mask_ratio: Annotated[float, Range(0.0, 1.0, low_open=True, high_open=True)]
    n_views: Annotated[int, Range(1, 10_000)]
    local_clients: Annotated[int | None, Range(1, 10_000)]
    n_jobs: Annotated[int, Range(1, 1024)]
    blas_threads: Annotated[int | None, Range(1, 1024)]


@dataclass(frozen=True)
class TheoryImprovementOptions:
    """``theory.improvement``: the edge-addition study at dimension ``d`` adding ``k`` edges."""

    d: Annotated[int, Range(1, 10_000_000)]
    k: Annotated[int, Range(0, 1_000_000)]
    seeds: Annotated[tuple[int, ...] | None, SEED]
    max_start_connectivity: Annotated[float, Range(1.0, CLIENTS.high)]
    max_candidates: Annotated[int, Range(1, 100_000_000)]


def keys_of(cls: type) -> set[str]:
    """The params keys a section of options declares (its dataclass fields)."""
    return {f.name for f in fields(cls)}

"""Strategies: what a federated / decentralized SSL method changes in the FedAvg round.

The simulators run the round; a strategy answers its questions through hooks, so each method of the
papers is one module of this package, declared under its params.yaml name by a torch-free spec
(``dssl.config.strategies``) and imported only when that name is used:

=====================  =====================================================================
hook                   question (default = FedAvg / paper A's FL and DecL baselines)
=====================  =====================================================================
initial_global_states  how many global models, initialised how (one: the initial model)
select_global          which global model a client starts from (0; FeatARC picks a cluster)
trains                 whether the client trains this round (yes; Orchestra's round 0 only clusters)
client_update_start    the state a client trains from, given the global and its local state
                       (replace everything, except the local keys the client keeps once it has
                       them; FedEMA blends, FedU keeps the predictor when it diverges)
client_loss            the local objective (``method.training_loss``; FedMAR adds A-MMD to z_bar)
client_upload          what is sent back (the shared state tensors; FedMAR adds z)
receive_uploads        what the server (FL) or the neighbourhood (DecL) records from a round's
                       uploads before aggregating or mixing (FeatARC's cluster choices, DecMAR's z)
aggregate              the server's merge of one global model's uploads (weighted FedAvg)
server_step            anything else the server does once per round (Orchestra's centroids)
gossip                 DecL's neighbour averaging, X <- W X (DecMAR also mixes z)
final_global_index     which global model is the FL run's result (0; FeatARC: its busiest cluster)
state_dict             the strategy's own server-side state, checkpointed with the run
=====================  =====================================================================

A strategy's options are the fields of its spec's config dataclass (types, defaults, ranges, choices):
``create_strategy`` builds the config from a params entry, refusing any other key, and the strategy takes
it. The spec's ``frameworks`` says where a strategy runs (FedMAR in FL only, DecMAR in DecL only).

Per-client state that must persist between rounds (kept model tensors, FedEMA's previous weights,
counters) lives in the ``local_state`` dict the simulators pass to the hooks: one dict per client,
checkpointed after every round. Keys under ``LOCAL_MODEL`` hold model tensors the client keeps.

Client-side hooks (``select_global`` to ``client_upload``) read the strategy's checkpointed state
(``state_dict``) and write only the client's ``local_state``, ``ctx.scratch`` and the upload (and
working buffers they rebuild for every client, such as FeatARC's frozen encoder); what the server
learns from a client it learns from the upload, in ``receive_uploads``, ``aggregate``, ``server_step``
or ``gossip``. So a client trains the same in the server's process as in a worker process that holds
a copy of the strategy (``dssl.federation.parallel``), and the same after a resume.

Per-client memory (the method's ``client_state_keys()``: EMA target / momentum networks, MoCo's
queue and pointer) is local in every strategy: never uploaded, never part of a global model, never
mixed by gossip. A client's first participation starts it from the method's initial memory, except
that its EMA target starts as a copy of the online network it receives (paper B's code does so); the
method's ``round_memory_keys()`` start so in every round (``restart_round_memory``).

Each strategy's module cites its paper, with the paper's defaults and where this code's differ.

References:
    [0] FedAvg, 2016, https://arxiv.org/abs/1602.05629
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
    [2] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from dssl.config.strategies import STRATEGY_SPECS, StrategySpec
from dssl.config.strategies._base import AggregationConfig
from dssl.federation.local import ClientData
from dssl.federation.state import StackedStates, StateDict, snapshot, weighted_average

LOCAL_MODEL = "model"  # local_state[LOCAL_MODEL]: the model tensors a client keeps for itself


@dataclass
class ClientContext:
    """Where one client's local training happens: handed to every client-side hook.

    ``participation`` counts the rounds the client trained in before this one (FedMAR's omega);
    ``expected_participations`` is how many rounds it trains in over the run on average (FL:
    rounds * K / N, DecL: rounds; paper A's default decay horizon Omega);
    ``generator`` seeds the method's views and masks for this client and round; ``scratch`` is
    per-round temporary storage shared by the hooks of this client (not checkpointed).
    """

    client_id: int
    round: int
    num_rounds: int
    participation: int
    data: ClientData
    device: torch.device
    generator: torch.Generator
    model_index: int = 0
    scratch: dict[str, Any] = field(default_factory=dict)
    expected_participations: float = 1.0


@dataclass
class Upload:
    """What one client sends back after local training."""

    client_id: int
    num_samples: int
    state: StateDict
    extras: dict[str, Any] = field(default_factory=dict)
    model_index: int = 0


class Strategy:
    """FedAvg behaviour for every hook; subclasses override what their method changes.

    ``aggregation`` weights clients in ``aggregate`` and in DecL's final average: ``uniform`` is
    paper A's [1] Algorithm 1 (the default: the paper's definition), ``data_size`` is its released code
    and McMahan et al.'s FedAvg [0]. ``keep_local``: the method's ``local_state_keys()`` (SimSiam's
    predictor, BYOL's target) stay on the client and are neither uploaded nor replaced -- paper B's [2]
    "keep local knowledge" design choice; off by default, as paper A's code averages every tensor (a
    strategy whose config has no ``keep_local`` keeps nothing local this way). A strategy reads its
    options from ``self.config``, the config dataclass its spec declares (``dssl.config.strategies``),
    checked against its ranges and choices when it was made; ``self.hparams``, every option with its
    value (defaults included), is what the run records and its checkpoint fingerprint holds.
    """

    name = "base"   # set from the spec by ``StrategySpec.load``

    def __init__(self, config: AggregationConfig) -> None:
        self.config = config
        self.hparams: dict[str, Any] = asdict(config)
        self.local_keys: frozenset[str] = frozenset()
        self.shared_keys: tuple[str, ...] = ()
        self.initial_local: StateDict = {}
        self.target_sources: dict[str, str] = {}
        self.round_memory: tuple[str, ...] = ()

    @property
    def spec(self) -> StrategySpec:
        """The spec this strategy's config belongs to: its name, options and frameworks, declared once."""
        for spec in STRATEGY_SPECS.values():
            if spec.config is type(self.config):
                return spec
        raise ValueError(f"{type(self.config).__name__} is the config of no registered strategy")

    def aggregation_weights(self, num_samples: Sequence[int]) -> np.ndarray:
        """Normalised weights of clients with these sample counts."""
        sizes = np.asarray(num_samples, dtype=np.float64)
        weights = sizes if self.config.aggregation == "data_size" else np.ones_like(sizes)
        if weights.sum() <= 0:
            raise ValueError(f"clients with sizes {sizes.tolist()} have no data to aggregate")
        return weights / weights.sum()

    # -- set-up ---------------------------------------------------------------------------------

    def setup(self, method: nn.Module) -> None:
        """Split the model's state keys into shared (aggregated) and local (kept by each client).

        The method's per-client memory is always local; ``select_local_keys`` adds the rest.
        """
        keys = list(method.state_dict())
        self.local_keys = frozenset(self.select_local_keys(method)) | set(method.client_state_keys())
        unknown = self.local_keys - set(keys)
        if unknown:
            raise KeyError(f"local keys the model does not have: {sorted(unknown)}")
        self.shared_keys = tuple(k for k in keys if k not in self.local_keys)
        self.initial_local = snapshot(method, [k for k in keys if k in self.local_keys])
        self.target_sources = {k: method.online_key_of(k) for k in method.part_keys("target")}
        self.round_memory = tuple(method.round_memory_keys())

    def select_local_keys(self, method: nn.Module) -> list[str]:
        return list(method.local_state_keys()) if getattr(self.config, "keep_local", False) else []

    def initial_global_states(self, initial: StateDict) -> list[StateDict]:
        return [initial]

    # -- client side ------------------------------------------------------------------------------

    def select_global(self, client_id: int, global_states: Sequence[StateDict], local_state: dict,
                      ctx: ClientContext) -> int:
        """Index of the global model the client starts from and uploads to (FL only).

        FeatARC picks the cluster model whose features agree best with the client's: it can keep the
        method from ``setup`` and read the client's images through ``ctx.data``.
        """
        return 0

    def client_update_start(self, client_id: int, global_state: Mapping[str, torch.Tensor],
                            local_state: dict, ctx: ClientContext) -> Mapping[str, torch.Tensor]:
        """The state loaded into the client's model before local training (paper A Alg. 1, line 4)."""
        kept = local_state.get(LOCAL_MODEL)
        if kept is None:
            kept = self.first_local_state(global_state)
        return self.restart_round_memory({**global_state, **kept})

    def restart_round_memory(self, start: dict) -> dict:
        """``start`` with the method's round memory (``round_memory_keys``: paper B's code restarts MoCo's
        key encoder and queue every round) as at a first participation: a target network copied from the
        online one in ``start``, other memory the initial one."""
        for key in self.round_memory:
            online = self.target_sources.get(key)
            start[key] = start[online] if online is not None else self.initial_local[key]
        return start

    def first_local_state(self, start: Mapping[str, torch.Tensor]) -> StateDict:
        """A client's local tensors before it ever trained: the initial ones, except that an EMA
        target starts as a copy of the online network in ``start`` (when ``start`` has it)."""
        state = dict(self.initial_local)
        for key, online in self.target_sources.items():
            if key in state and online in start:
                state[key] = start[online]
        return state

    def trains(self, ctx: ClientContext) -> bool:
        """Whether the client runs its local epochs this round (otherwise it only uploads)."""
        return True

    def client_loss(self, method: nn.Module, images: torch.Tensor,
                    ctx: ClientContext) -> Mapping[str, torch.Tensor]:
        """Scalar losses of one (client-augmented) batch; ``"loss"`` is minimised."""
        return method.training_loss(images, generator=ctx.generator)

    def client_upload(self, client_id: int, method: nn.Module, local_state: dict,
                      ctx: ClientContext) -> Upload:
        """Keep the local keys on the client; send clones of the shared ones."""
        if self.local_keys:
            local_state[LOCAL_MODEL] = snapshot(method, sorted(self.local_keys))
        return Upload(client_id, ctx.data.num_samples, snapshot(method, self.shared_keys),
                      model_index=ctx.model_index)

    # -- server / neighbourhood side --------------------------------------------------------------

    def receive_uploads(self, uploads: Sequence[Upload], round_index: int) -> None:
        """Once per round, when every upload has arrived, before ``aggregate`` (FL) or ``gossip`` (DecL)."""

    def aggregate(self, uploads: Sequence[Upload], weights: np.ndarray, global_state: StateDict) -> StateDict:
        """FedAvg over the shared keys; ``weights`` are already normalised (data size or uniform).

        ``global_state`` (the model the clients started from) is unused by FedAvg; L-DAWA needs it.
        """
        return weighted_average([u.state for u in uploads], weights)

    def server_step(self, global_states: list[StateDict], uploads: Sequence[Upload],
                    round_index: int) -> list[StateDict]:
        """After aggregation, once per FL round; returns the global models of the next round."""
        return global_states

    def gossip(self, states: StackedStates, mixing: torch.Tensor, uploads: Sequence[Upload],
               round_index: int) -> None:
        """DecL's neighbour averaging, X <- W X, once per round.

        With the ``train_then_mix`` order it runs after every client trained and ``uploads`` hold
        their rows; with ``mix_then_train`` (paper A's Alg. 2) it runs before, ``uploads`` is empty
        and a strategy that exchanges more than weights keeps what it sends in its own state.
        """
        states.mix(mixing)

    def final_global_index(self, global_states: Sequence[StateDict]) -> int:
        """Index of the global model an FL run returns for evaluation (one model: 0).

        A strategy with several global models (FeatARC's clusters) chooses here, from what the
        run saw (never from evaluation labels); it may read its own checkpointed state.
        """
        return 0

    # -- checkpointing ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state:
            raise ValueError(f"strategy {self.name!r} has no state, got keys {sorted(state)}")


def create_strategy(name: str, **options: Any) -> Strategy:
    """A strategy by registry name with its options, e.g. ``create_strategy("fedavg", aggregation="data_size")``:
    the spec's config built from ``options`` (a value outside its range or choices is a ValueError), then the
    strategy class, imported now. An unknown name raises ``UnknownNameError`` (a KeyError) listing the known
    ones; an unknown option a ValueError listing the strategy's (``EntrySpec.options``), so params typos fail loudly."""
    spec = STRATEGY_SPECS[name]
    return spec.load()(spec.options(options))

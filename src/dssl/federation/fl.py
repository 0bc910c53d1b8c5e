"""The FL round loop (``FLSimulator``): paper A's Algorithm 1 / FedAvg.

Each round K of N clients, drawn uniformly without replacement (the whole schedule is drawn up front
from the seed, ``make_schedule``), train E epochs from the global model; the server aggregates their
uploads. The shared machinery (client training, checkpoints, resumption) is ``simulator.Simulator``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Mapping, Sequence

import numpy as np
from torch import nn

from dssl.config.options import CLIENTS
from dssl.federation.local import ClientData, LocalResult
from dssl.federation.parallel import ClientTask
from dssl.federation.reproducibility import Stream, derive_seed
from dssl.federation.simulator import Simulator
from dssl.federation.state import StateDict, snapshot
from dssl.federation.strategies.base import Strategy, Upload
from dssl.federation.train_config import TrainConfig


@dataclass(frozen=True)
class FLConfig(TrainConfig):
    clients_per_round: Annotated[int, CLIENTS] = 5


def make_schedule(num_clients: int, per_round: int, rounds: int, seed: int) -> list[list[int]]:
    """Clients of each round, uniformly without replacement within a round (sorted for reading)."""
    if not 1 <= per_round <= num_clients:
        raise ValueError(f"clients_per_round must be in 1..{num_clients}, got {per_round}")
    rng = np.random.default_rng(derive_seed(seed, Stream.SCHEDULE))
    return [sorted(int(c) for c in rng.choice(num_clients, per_round, replace=False)) for _ in range(rounds)]


class FLSimulator(Simulator):
    """Federated learning with a server (paper A, Algorithm 1; McMahan et al.'s FedAvg loop).

    ``FLSimulator(method, clients, strategy, FLConfig(...), checkpoint_dir=..., run_config=...).run()``
    """

    kind = "fl"
    config: FLConfig

    def __init__(self, method: nn.Module, clients: Sequence[ClientData], strategy: Strategy,
                 config: FLConfig, **kwargs: Any):
        if not isinstance(config, FLConfig):
            raise TypeError(f"FLSimulator needs an FLConfig, got {type(config).__name__}")
        super().__init__(method, clients, strategy, config, **kwargs)
        # Global models hold only the shared keys: per-client memory never enters them.
        self.global_states = strategy.initial_global_states(snapshot(method, strategy.shared_keys))

    def _make_schedule(self) -> list[list[int]]:
        config = self.config
        return make_schedule(len(self.clients), config.clients_per_round, config.rounds, config.seed)

    def _run_round(self, round_index: int) -> tuple[list[LocalResult], dict]:
        tasks = [ClientTask(client_id, round_index, sum(client_id in chosen for chosen in self.schedule[:round_index]))
                 for client_id in self.schedule[round_index]]
        uploads, results = map(list, zip(*self._train_clients(tasks, self.global_states)))
        self.strategy.receive_uploads(uploads, round_index)
        self.global_states = self.strategy.server_step(self._aggregate(uploads), uploads, round_index)
        return results, {}

    def _aggregate(self, uploads: list[Upload]) -> list[StateDict]:
        """Aggregate each global model over the uploads that started from it (FedAvg by default)."""
        merged = list(self.global_states)
        for index in sorted({u.model_index for u in uploads}):
            group = [u for u in uploads if u.model_index == index]
            weights = self.strategy.aggregation_weights([u.num_samples for u in group])
            previous = self.global_states[index]
            merged[index] = {**previous, **self.strategy.aggregate(group, weights, previous)}
        return merged

    def _model_payload(self) -> dict:
        return {"global_states": self.global_states}

    def _restore_models(self, payload: Mapping[str, Any]) -> None:
        self.global_states = payload["global_states"]

    def _result_states(self) -> tuple[StateDict, list[StateDict], int]:
        """The strategy's final global model (model 0 unless it keeps several), completed with the
        initial local tensors so that it loads into the method (as DecL's final model);
        ``global_states`` are the shared tensors only."""
        index = self.strategy.final_global_index(self.global_states)
        if not 0 <= index < len(self.global_states):
            raise IndexError(f"strategy {self.strategy.name!r} chose global model {index} of "
                             f"{len(self.global_states)}")
        return {**self.strategy.initial_local, **self.global_states[index]}, self.global_states, index

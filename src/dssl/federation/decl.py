"""The DecL round loop and its push-sum state (``DecLSimulator``): paper A's Algorithm 2.

Each round all clients average with their neighbours at once, X <- W X with the row-stochastic mixing
matrix W (``dssl.topology.mixing``), then every client trains E epochs from its mixed model (order
``mix_then_train``, Alg. 2 line 10); paper A's code trains first, then mixes (order ``train_then_mix``).
The final model is the average of all clients (``Strategy.aggregation_weights``). With a
column-stochastic push-sum matrix P each client also keeps a push-sum weight w_i (Kempe et al. 2003;
Assran et al., Stochastic Gradient Push, 2019): rows hold x_i, a client trains from x_i / w_i, its
update is added to x_i, and x <- P x, w <- P w. The shared machinery (client training, checkpoints,
resumption) is ``simulator.Simulator``'s.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from dssl.federation.client_states import to_device
from dssl.federation.local import ClientData, LocalResult
from dssl.federation.parallel import ClientTask
from dssl.federation.simulator import Simulator
from dssl.federation.state import StackedStates, StateDict
from dssl.federation.strategies.base import LOCAL_MODEL, Strategy, Upload
from dssl.federation.train_config import TrainConfig
from dssl.topology.mixing import ORDERS


DECL_ORDERS = ORDERS


@dataclass(frozen=True)
class DecLConfig(TrainConfig):
    """``order``: ``mix_then_train`` is paper A's Algorithm 2 (line 10 mixes, then the client trains;
    the final model averages the trained models); ``train_then_mix`` is its released code."""

    order: str = "mix_then_train"

    def validate(self) -> None:
        super().validate()
        if self.order not in DECL_ORDERS:
            raise ValueError(f"order must be one of {', '.join(DECL_ORDERS)}, got {self.order!r}")


class DecLSimulator(Simulator):
    """Decentralized learning on a fixed graph (paper A, Algorithm 2).

    ``DecLSimulator(method, clients, strategy, mixing, DecLConfig(...), checkpoint_dir=...).run()``;
    ``mixing`` is the N x N row-stochastic matrix of ``dssl.topology.mixing.mixing_matrix``, or with
    ``push_sum=True`` a column-stochastic one run with push-sum weights. Each round's record adds
    ``consensus_distance``: mean_i ||x_i - x_bar||^2 right after mixing (push-sum: of x_i / w_i).
    """

    kind = "decl"
    config: DecLConfig

    def __init__(self, method: nn.Module, clients: Sequence[ClientData], strategy: Strategy,
                 mixing: np.ndarray, config: DecLConfig, *, push_sum: bool = False, **kwargs: Any):
        if not isinstance(config, DecLConfig):
            raise TypeError(f"DecLSimulator needs a DecLConfig, got {type(config).__name__}")
        self.push_sum = bool(push_sum)
        self.mixing_np = _check_mixing(mixing, len(clients), column=self.push_sum)
        super().__init__(method, clients, strategy, config, **kwargs)
        self.mixing = torch.as_tensor(self.mixing_np, device=self.device)
        self.local_template = {k: self.initial_state[k] for k in strategy.local_keys}
        self.states = StackedStates({k: self.initial_state[k] for k in strategy.shared_keys}, len(clients))
        self.push_weights = torch.ones(len(clients), dtype=torch.float64, device=self.device)

    def _fingerprint_items(self, run_config: Mapping[str, Any]) -> dict:
        items = super()._fingerprint_items(run_config)
        items["mixing"] = hashlib.sha256(self.mixing_np.tobytes()).hexdigest()
        if self.push_sum:
            items["push_sum"] = True
        return items

    def _make_schedule(self) -> list[list[int]]:
        return [list(range(len(self.clients)))] * self.config.rounds

    def _run_round(self, round_index: int) -> tuple[list[LocalResult], dict]:
        mix_first = self.config.order == "mix_then_train"
        extras = {"consensus_distance": self._gossip([], round_index)} if mix_first else {}
        tasks = [ClientTask(client_id, round_index, round_index,
                            [{**self.local_template, **self._model_row(client_id)}])
                 for client_id in range(len(self.clients))]
        uploads, results = map(list, zip(*self._train_clients(tasks, receive=self._store_upload)))
        self.strategy.receive_uploads(uploads, round_index)
        if not mix_first:
            extras["consensus_distance"] = self._gossip(uploads, round_index)
        return results, extras

    def _store_upload(self, task: ClientTask, upload: Upload) -> None:
        """Write a trained model into its row as soon as it arrives (its clone is dropped: the row holds it)."""
        (start,) = task.global_states
        self._write_trained(task.client_id, start, upload.state)
        upload.state = self.states.row(task.client_id)

    def _gossip(self, uploads: list[Upload], round_index: int) -> float:
        self.strategy.gossip(self.states, self.mixing, uploads, round_index)
        if self.push_sum:
            self.push_weights = self.mixing.to(torch.float64) @ self.push_weights
        return self._consensus_distance()

    def _model_row(self, client_id: int) -> StateDict:
        """The model client ``client_id`` holds: its row (views), de-biased by w_i under push-sum."""
        row = self.states.row(client_id)
        if not self.push_sum:
            return row
        weight = self.push_weights[client_id]
        return {k: (v / weight.to(v.dtype)) if v.is_floating_point() else (v / weight).round().to(v.dtype)
                for k, v in row.items()}

    def _write_trained(self, client_id: int, start: StateDict, trained: Mapping[str, torch.Tensor]) -> None:
        """Store a trained model; under push-sum add the update to x_i (SGP's x_i - lr * g(x_i / w_i))."""
        if self.push_sum:
            row, weight = self.states.row(client_id), self.push_weights[client_id]
            trained = {k: row[k] + (trained[k] - start[k]) if row[k].is_floating_point()
                       else trained[k].double() * weight for k in row}
        self.states.write_row(client_id, trained)

    def _consensus_distance(self) -> float:
        if not self.push_sum:
            return self.states.consensus_distance()
        models = self.states.floats / self.push_weights.to(self.states.floats.dtype)[:, None]
        return float((models - models.mean(dim=0, keepdim=True)).pow(2).sum(dim=1).mean())

    def client_state(self, client_id: int) -> StateDict:
        """Client ``client_id``'s current model (views into the stacked states for float tensors)."""
        kept = to_device(self.local_states[client_id].get(LOCAL_MODEL, {}), self.device)
        return {**self.local_template, **self._model_row(client_id), **kept}

    def _model_payload(self) -> dict:
        return {"client_states": self.states.tensors(), "push_weights": self.push_weights}

    def _restore_models(self, payload: Mapping[str, Any]) -> None:
        self.states.load_tensors(payload["client_states"])
        self.push_weights = payload["push_weights"].to(self.device)

    def _result_states(self) -> tuple[StateDict, list[StateDict], int]:
        """The weighted average of the clients; under push-sum sum_j a_j x_j / sum_j a_j w_j."""
        weights = self.strategy.aggregation_weights([c.num_samples for c in self.clients])
        shared = self.states.average(weights)
        if self.push_sum:
            mass = float(torch.as_tensor(weights, dtype=torch.float64, device=self.device) @ self.push_weights)
            shared = {k: v / mass if v.is_floating_point() else (v / mass).round().to(v.dtype)
                      for k, v in shared.items()}
        return {**self.local_template, **shared}, [shared], 0


def _check_mixing(mixing: np.ndarray, num_clients: int, column: bool = False) -> np.ndarray:
    matrix = np.asarray(mixing, dtype=np.float64)
    if matrix.shape != (num_clients, num_clients):
        raise ValueError(f"mixing matrix must be {num_clients} x {num_clients}, got {matrix.shape}")
    if not np.isfinite(matrix).all() or (matrix < 0).any():
        raise ValueError("mixing matrix must be finite and non-negative")
    axis, kind = (0, "column") if column else (1, "row")
    if not np.allclose(matrix.sum(axis=axis), 1.0, atol=1e-9):
        raise ValueError(f"mixing matrix must be {kind}-stochastic, {kind} sums {matrix.sum(axis=axis).tolist()}")
    return np.ascontiguousarray(matrix)

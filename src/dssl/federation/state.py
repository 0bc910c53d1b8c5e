"""Model states as plain ``{name: tensor}`` dicts: averaging, in-place loading, stacking for gossip.

Averaging rule (FedAvg, McMahan et al. 2017; paper A's released code averages *every* state tensor,
buffers included): floating-point tensors are the weighted mean in their own dtype. Integer and
boolean tensors (BatchNorm's ``num_batches_tracked``) are the weighted mean rounded to the nearest
integer -- a counter of the "average client". Paper A's code sums the float-cast counters times the
weights and lets ``load_state_dict`` truncate, which differs from ours by at most one.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

StateDict = dict[str, torch.Tensor]


def normalised_weights(weights: Sequence[float] | np.ndarray | torch.Tensor) -> torch.Tensor:
    """Weights as a float64 tensor summing to one; a zero or negative total is an error."""
    w = torch.as_tensor(np.asarray(weights, dtype=np.float64))
    total = float(w.sum())
    if w.ndim != 1 or (w < 0).any() or total <= 0:
        raise ValueError(f"aggregation weights must be non-negative with a positive sum, got {w.tolist()}")
    return w / total


def combine(stacked: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted mean over the first axis of ``stacked`` (weights already normalised)."""
    if stacked.is_floating_point():
        return torch.tensordot(weights.to(stacked.device, stacked.dtype), stacked, dims=1)
    mean = torch.tensordot(weights.to(stacked.device), stacked.to(torch.float64), dims=1)
    return mean.round().to(stacked.dtype)


def weighted_average(
    states: Sequence[Mapping[str, torch.Tensor]],
    weights: Sequence[float] | np.ndarray | torch.Tensor,
) -> StateDict:
    """FedAvg of ``states`` key by key: sum_k w_k theta_k with the weights normalised to sum to one."""
    if not states:
        raise ValueError("nothing to average")
    w = normalised_weights(weights)
    if len(w) != len(states):
        raise ValueError(f"{len(states)} states but {len(w)} weights")
    return {key: combine(torch.stack([s[key] for s in states]), w) for key in states[0]}


@torch.no_grad()
def load_state_(module: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Copy ``state`` into the module's own tensors in place (no new tensors, optimizer refs stay valid)."""
    for key, target in module.state_dict().items():
        if key not in state:
            raise KeyError(f"state has no entry for {key!r}")
        target.copy_(state[key])


def snapshot(module: nn.Module, keys: Iterable[str] | None = None) -> StateDict:
    """Detached clones of the module's state tensors (all of them, or only ``keys``)."""
    state = module.state_dict()
    wanted = state.keys() if keys is None else keys
    return {key: state[key].detach().clone() for key in wanted}


def state_digest(state: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 of names, dtypes, shapes and bytes: identifies an initial model in a fingerprint."""
    digest = hashlib.sha256()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        digest.update(f"{key}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class StackedStates:
    """The shared part of N client models, one row per client, for decentralized gossip.

    Floating-point tensors live in one ``[N, P]`` buffer so that a gossip step ``X <- W X`` is a
    single matrix product; integer tensors live in a float64 ``[N, Q]`` buffer mixed the same way and
    rounded (the averaging rule of this module). ``view(key)`` is a ``[N, *shape]`` view.
    """

    def __init__(self, template: Mapping[str, torch.Tensor], num_rows: int):
        float_dtypes = {t.dtype for t in template.values() if t.is_floating_point()}
        if len(float_dtypes) > 1:
            raise TypeError(f"all floating-point state tensors must share one dtype, got {float_dtypes}")
        dtype = float_dtypes.pop() if float_dtypes else torch.float32
        device = next(iter(template.values())).device
        self.keys = list(template)
        self.shapes = {k: template[k].shape for k in self.keys}
        self.dtypes = {k: template[k].dtype for k in self.keys}
        float_keys = [k for k in self.keys if template[k].is_floating_point()]
        count_keys = [k for k in self.keys if not template[k].is_floating_point()]
        self.floats = torch.empty(num_rows, _numel(template, float_keys), dtype=dtype, device=device)
        self.counts = torch.empty(num_rows, _numel(template, count_keys), dtype=torch.float64, device=device)
        self._views = {**self._make_views(self.floats, template, float_keys),
                       **self._make_views(self.counts, template, count_keys)}
        for row in range(num_rows):
            self.write_row(row, template)

    @staticmethod
    def _make_views(buffer: torch.Tensor, template: Mapping[str, torch.Tensor], keys: list[str]) -> dict:
        views, offset = {}, 0
        for key in keys:
            numel = template[key].numel()
            views[key] = buffer[:, offset:offset + numel].view(buffer.shape[0], *template[key].shape)
            offset += numel
        return views

    @property
    def num_rows(self) -> int:
        return self.floats.shape[0]

    def view(self, key: str) -> torch.Tensor:
        return self._views[key]

    def row(self, index: int) -> StateDict:
        """Client ``index``'s state: float tensors are views, integer tensors are rounded copies."""
        return {key: self._read(self._views[key][index], key) for key in self.keys}

    def _read(self, value: torch.Tensor, key: str) -> torch.Tensor:
        return value if self.dtypes[key].is_floating_point else value.round().to(self.dtypes[key])

    @torch.no_grad()
    def write_row(self, index: int, state: Mapping[str, torch.Tensor]) -> None:
        for key in self.keys:
            self._views[key][index].copy_(state[key])

    @torch.no_grad()
    def mix(self, mixing: torch.Tensor) -> None:
        """One gossip step X <- W X (paper A, Algorithm 2): row i becomes sum_j W_ij x_j."""
        self.floats.copy_(mixing.to(self.floats.device, self.floats.dtype) @ self.floats)
        self.counts.copy_((mixing.to(self.counts.device, torch.float64) @ self.counts).round())

    @torch.no_grad()
    def average(self, weights: Sequence[float] | np.ndarray | torch.Tensor) -> StateDict:
        """The weighted mean of all rows (DecL's final model), as a fresh state dict."""
        w = normalised_weights(weights)
        return {key: self._read(combine(self._views[key], w), key) for key in self.keys}

    @torch.no_grad()
    def consensus_distance(self) -> float:
        """Mean over clients of ||x_i - x_bar||^2 over the float parameters (0 once in consensus)."""
        centred = self.floats - self.floats.mean(dim=0, keepdim=True)
        return float(centred.pow(2).sum(dim=1).mean())

    def tensors(self) -> dict[str, torch.Tensor]:
        return {"floats": self.floats, "counts": self.counts}

    @torch.no_grad()
    def load_tensors(self, tensors: Mapping[str, torch.Tensor]) -> None:
        self.floats.copy_(tensors["floats"])
        self.counts.copy_(tensors["counts"])


def _numel(template: Mapping[str, torch.Tensor], keys: list[str]) -> int:
    return sum(template[k].numel() for k in keys)

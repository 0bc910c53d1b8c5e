"""Distances between model weights: paper A's Table 5 (local vs global models).

Paper A, appendix A.3.1: "we compute the layer-wise l2-norm difference between local and global model
weights and report the sum across all layers", i.e. sum_l ||W_a^l - W_b^l||_2 over the model's tensors
(the Frobenius norm of each tensor's difference). That is ``layerwise_sum``, the default; its released
code's drift measure (``param_drift_abs``) is the l2 norm of the whole flattened parameter vector,
``global`` here. Only floating-point tensors present in both models count (integer counters such as
BatchNorm's ``num_batches_tracked`` are not weights); ``keys`` restricts the sum further, e.g. to the
encoder's tensors.
"""

from __future__ import annotations

from itertools import combinations
from typing import Iterable, Mapping

import torch

FORMS = ("layerwise_sum", "global")


def _shared_float_keys(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor],
                       keys: Iterable[str] | None) -> list[str]:
    wanted = list(keys) if keys is not None else [k for k in a if k in b]
    missing = [k for k in wanted if k not in a or k not in b]
    if missing:
        raise KeyError(f"tensors missing from one of the models: {missing[:5]}")
    for key in wanted:
        if a[key].shape != b[key].shape:
            raise ValueError(f"tensor {key!r} has shape {tuple(a[key].shape)} in one model, "
                             f"{tuple(b[key].shape)} in the other")
    return [k for k in wanted if a[k].is_floating_point()]


@torch.no_grad()
def weight_distance(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], *,
                    form: str = "layerwise_sum", keys: Iterable[str] | None = None) -> float:
    """The distance between two models' weights (state dicts), in float64."""
    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}; known: {', '.join(FORMS)}")
    norms = torch.stack([torch.linalg.vector_norm((a[k].double() - b[k].double().to(a[k].device)).flatten())
                         for k in _shared_float_keys(a, b, keys)])
    return float(norms.sum() if form == "layerwise_sum" else norms.pow(2).sum().sqrt())


def pairwise_weight_distances(models: Mapping[str, Mapping[str, torch.Tensor]], *, form: str = "layerwise_sum",
                              keys: Iterable[str] | None = None) -> dict[tuple[str, str], float]:
    """Every pair of named models, e.g. {"local 1", "local 100", "global"}: Table 5's three rows."""
    keys = list(keys) if keys is not None else None
    return {(x, y): weight_distance(models[x], models[y], form=form, keys=keys) for x, y in combinations(models, 2)}

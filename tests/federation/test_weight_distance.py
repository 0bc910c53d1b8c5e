"""Paper A's Table 5 metric: the layer-wise sum of l2 weight differences (and the code's global norm)."""

from __future__ import annotations

import math

import pytest
import torch

from dssl.federation.weight_distance import pairwise_weight_distances, weight_distance


def models():
    a = {"w": torch.tensor([3.0, 0.0]), "b": torch.tensor([[0.0]]), "n": torch.tensor(5)}
    b = {"w": torch.tensor([0.0, 4.0]), "b": torch.tensor([[1.0]]), "n": torch.tensor(9)}
    return a, b


def test_layerwise_sum_and_global_norm_by_hand():
    a, b = models()
    assert weight_distance(a, b) == pytest.approx(5.0 + 1.0)  # ||(3, -4)|| + ||1||; the counter n is skipped
    assert weight_distance(a, b, form="global") == pytest.approx(math.sqrt(26.0))
    assert weight_distance(a, b, keys=["w"]) == pytest.approx(5.0)
    assert weight_distance(a, a) == 0.0


def test_pairs_and_errors():
    a, b = models()
    c = {k: v + 1 if v.is_floating_point() else v for k, v in a.items()}
    distances = pairwise_weight_distances({"local 1": a, "local 2": b, "global": c})
    assert set(distances) == {("local 1", "local 2"), ("local 1", "global"), ("local 2", "global")}
    assert distances[("local 1", "global")] == pytest.approx(math.sqrt(2.0) + 1.0)
    with pytest.raises(ValueError, match="form"):
        weight_distance(a, b, form="l1")
    with pytest.raises(KeyError, match="missing"):
        weight_distance(a, {"w": b["w"]}, keys=["w", "b"])
    with pytest.raises(ValueError, match="shape"):
        weight_distance(a, {**b, "w": torch.zeros(3)})


def test_table5_rows_of_one_seed_are_every_pair_of_locals_and_global():
    from dssl.pipeline.weight_distance import seed_distances

    global_ = {"w": torch.zeros(2, 2), "b": torch.zeros(2)}
    first = {"w": torch.full((2, 2), 1.0), "b": torch.zeros(2)}        # ||.|| = 2
    last = {"w": torch.zeros(2, 2), "b": torch.tensor([3.0, 4.0])}     # ||.|| = 5
    rows = seed_distances(global_, {0: first, 9: last})
    assert list(rows) == ["local 1 vs local 10", "local 1 vs global", "local 10 vs global"]
    assert rows["local 1 vs global"] == pytest.approx(2.0) and rows["local 10 vs global"] == pytest.approx(5.0)
    assert rows["local 1 vs local 10"] == pytest.approx(2.0 + 5.0)      # summed over the two tensors

"""Averaging and gossip on hand-made states, checked against hand-computed numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dssl.federation.state import StackedStates, load_state_, snapshot, weighted_average


def _state(weight: list[float], bias: float, count: int) -> dict[str, torch.Tensor]:
    return {
        "w": torch.tensor(weight, dtype=torch.float32),
        "b": torch.tensor(bias, dtype=torch.float64),
        "bn.num_batches_tracked": torch.tensor(count, dtype=torch.long),
    }


def test_weighted_average_equals_hand_computed_mean():
    states = [_state([1.0, 2.0], 0.5, 10), _state([3.0, -2.0], 1.5, 20), _state([5.0, 0.0], -1.0, 31)]
    # Data sizes 1, 1, 2 -> weights 1/4, 1/4, 1/2.
    avg = weighted_average(states, [1, 1, 2])
    assert torch.equal(avg["w"], torch.tensor([(1 + 3 + 2 * 5) / 4, (2 - 2 + 0) / 4]))
    assert avg["w"].dtype == torch.float32
    assert avg["b"].item() == pytest.approx((0.5 + 1.5 - 2.0) / 4)
    assert avg["b"].dtype == torch.float64
    # Integer counters: the weighted mean rounded to the nearest integer, dtype kept.
    counter = avg["bn.num_batches_tracked"]
    assert counter.dtype == torch.long and counter.item() == round((10 + 20 + 2 * 31) / 4)  # 23


def test_uniform_weights_and_bad_weights():
    states = [_state([0.0, 4.0], 0.0, 1), _state([2.0, 0.0], 1.0, 2)]
    avg = weighted_average(states, [1.0, 1.0])
    assert torch.equal(avg["w"], torch.tensor([1.0, 2.0]))
    assert avg["bn.num_batches_tracked"].item() == 2  # 1.5 rounds half to even
    with pytest.raises(ValueError):
        weighted_average(states, [0.0, 0.0])
    with pytest.raises(ValueError):
        weighted_average(states, [1.0])


def test_gossip_with_a_known_three_node_matrix():
    # Path graph 0 - 1 - 2 with uniform weights over closed neighbourhoods (paper A, Algorithm 2).
    mixing = torch.tensor([[1 / 2, 1 / 2, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.0, 1 / 2, 1 / 2]], dtype=torch.float64)
    rows = [_state([3.0, 0.0], 1.0, 3), _state([6.0, 3.0], 2.0, 6), _state([0.0, 9.0], 4.0, 10)]
    rows = [{**row, "b": row["b"].float()} for row in rows]  # stacking needs one float dtype
    stacked = StackedStates(rows[0], 3)
    for i, row in enumerate(rows):
        stacked.write_row(i, row)
    stacked.mix(mixing)
    expected_w = [[4.5, 1.5], [3.0, 4.0], [3.0, 6.0]]
    expected_counts = [round(4.5), round(19 / 3), 8]
    expected_b = [1.5, 7 / 3, 3.0]
    for i in range(3):
        row = stacked.row(i)
        assert torch.allclose(row["w"], torch.tensor(expected_w[i]), atol=1e-6)
        assert row["b"].item() == pytest.approx(expected_b[i])
        assert row["bn.num_batches_tracked"].dtype == torch.long
        assert row["bn.num_batches_tracked"].item() == expected_counts[i]
    final = stacked.average([1, 1, 1])
    assert torch.allclose(final["w"], torch.tensor([10.5 / 3, 11.5 / 3]), atol=1e-6)


def test_stacked_states_share_one_float_buffer_and_round_trip():
    template = _state([1.0, 2.0], 3.0, 4)
    template["b"] = template["b"].float()
    stacked = StackedStates(template, 2)
    assert stacked.floats.shape == (2, 3) and stacked.counts.shape == (2, 1)
    stacked.view("w")[1].fill_(7.0)
    assert torch.equal(stacked.row(1)["w"], torch.tensor([7.0, 7.0]))
    clone = StackedStates(template, 2)
    clone.load_tensors(stacked.tensors())
    assert all(torch.equal(clone.row(1)[k], stacked.row(1)[k]) for k in template)
    # Rows [1, 2, 3] and [7, 7, 3], mean [4, 4.5, 3]: each row is 9 + 6.25 away.
    assert clone.consensus_distance() == pytest.approx(15.25)


def test_mixed_float_dtypes_are_rejected_by_stacking():
    with pytest.raises(TypeError):
        StackedStates(_state([1.0], 1.0, 1), 2)  # float32 and float64 tensors


def test_load_state_copies_in_place():
    module = torch.nn.BatchNorm1d(2)
    params_before = [id(p) for p in module.parameters()]
    state = {k: v.clone() + 1 for k, v in snapshot(module).items()}
    load_state_(module, state)
    assert [id(p) for p in module.parameters()] == params_before
    assert all(torch.equal(v, state[k]) for k, v in module.state_dict().items())
    with pytest.raises(KeyError):
        load_state_(module, {"weight": state["weight"]})


def test_mixing_rows_need_not_be_symmetric_but_matrix_must_be_row_stochastic():
    from dssl.federation.decl import _check_mixing

    _check_mixing(np.array([[0.5, 0.5], [0.2, 0.8]]), 2)
    with pytest.raises(ValueError, match="row-stochastic"):
        _check_mixing(np.array([[0.5, 0.6], [0.2, 0.8]]), 2)
    with pytest.raises(ValueError, match="2 x 2"):
        _check_mixing(np.eye(3), 2)

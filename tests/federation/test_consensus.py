"""DecL consensus: the order of mixing and training (paper A's Alg. 2 vs its code) and push-sum."""

from __future__ import annotations

import fl_resume_helper as helper
import numpy as np
import pytest
import torch

from dssl.config.strategies.fedavg import FedAvgConfig
from dssl.federation import ClientData, DecLConfig, DecLSimulator, OptimizerConfig
from dssl.federation.strategies.fedavg import FedAvg
from dssl.methods import create_method
from dssl.topology.mixing import mixing_matrix

pytestmark = pytest.mark.usefixtures("single_thread")

PATH = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=bool)  # 0 - 1 - 2
OFFSETS = [0.0, 0.0, 3.0]  # client i starts from the initial model + OFFSETS[i] (float tensors)


class Recording(FedAvg):
    """FedAvg that records the state each client starts its local training from."""

    def __init__(self, config: FedAvgConfig = FedAvgConfig()) -> None:
        super().__init__(config)
        self.starts: dict[tuple[int, int], dict[str, torch.Tensor]] = {}

    def client_update_start(self, client_id, global_state, local_state, ctx):
        start = super().client_update_start(client_id, global_state, local_state, ctx)
        self.starts[(ctx.round, client_id)] = {k: v.detach().clone() for k, v in start.items()}
        return start


def _simulator(mixing: np.ndarray, order: str, *, push_sum: bool = False, lr: float = 0.0, rounds: int = 1,
               checkpoint_dir=None) -> DecLSimulator:
    torch.manual_seed(0)
    method = create_method("simsiam", "cnn_small", image_size=8, in_chans=1)
    images = helper.tiny_images(num=18)
    clients = [ClientData(images, np.arange(i * 6, (i + 1) * 6)) for i in range(3)]
    config = DecLConfig(rounds=rounds, batch_size=6, seed=5, order=order,
                        optimizer=OptimizerConfig(name="sgd", base_lr=lr, weight_decay=0.0))
    simulator = DecLSimulator(method, clients, Recording(), mixing, config, push_sum=push_sum,
                              checkpoint_dir=checkpoint_dir)
    for i, offset in enumerate(OFFSETS):  # distinct client models, so that mixing shows
        row = simulator.states.row(i)
        simulator.states.write_row(i, {k: v + offset if v.is_floating_point() else v for k, v in row.items()})
    return simulator


def _offset(simulator: DecLSimulator, state: dict) -> float:
    """c where every parameter of ``state`` is the initial one + c (buffers move in training mode)."""
    names = [name for name, _ in simulator.method.named_parameters()]
    differences = torch.cat([(state[k] - simulator.initial_state[k]).flatten() for k in names])
    assert float(differences.max() - differences.min()) < 1e-5, "not a constant offset"
    return float(differences.mean())


def test_mix_then_train_trains_each_client_from_its_mixed_model():
    """Paper A, Alg. 2 line 10: W_i <- sum_j W_ij W_j, then local training from it."""
    mixing = mixing_matrix(PATH, "uniform")
    simulator = _simulator(mixing, "mix_then_train")
    simulator.run()
    for i in range(3):
        expected = float(mixing[i] @ np.array(OFFSETS))
        assert _offset(simulator, simulator.strategy.starts[(0, i)]) == pytest.approx(expected, abs=1e-5)
    # With learning rate 0 the parameters end where they started: the final model averages the
    # trained (not re-mixed) client models, Alg. 2 line 18.
    final = simulator._result_states()[0]
    assert _offset(simulator, final) == pytest.approx(np.mean(mixing @ OFFSETS), abs=1e-5)


def test_train_then_mix_trains_each_client_from_its_own_model():
    """Paper A's released code: each client trains its own model, then all mix."""
    mixing = mixing_matrix(PATH, "uniform")
    simulator = _simulator(mixing, "train_then_mix", rounds=2)
    simulator.run()
    for i in range(3):
        assert _offset(simulator, simulator.strategy.starts[(0, i)]) == pytest.approx(OFFSETS[i], abs=1e-6)
        expected = float(mixing[i] @ np.array(OFFSETS))  # mixed at the end of round 1
        assert _offset(simulator, simulator.strategy.starts[(1, i)]) == pytest.approx(expected, abs=1e-5)


def test_push_sum_trains_from_the_de_biased_model_and_keeps_the_exact_mean():
    mixing = mixing_matrix(PATH, "push_sum")  # columns: 1/2 | 1/3 | 1/2 over each closed neighbourhood
    simulator = _simulator(mixing, "mix_then_train", push_sum=True, rounds=1)
    simulator.run()
    # w = P 1 = (5/6, 4/3, 5/6); P x = (0, 3/2, 3/2); the client trains from x_i / w_i
    torch.testing.assert_close(simulator.push_weights, torch.tensor([5 / 6, 4 / 3, 5 / 6], dtype=torch.float64))
    for i, expected in enumerate([0.0, 1.5 / (4 / 3), 1.5 / (5 / 6)]):
        assert _offset(simulator, simulator.strategy.starts[(0, i)]) == pytest.approx(expected, abs=1e-5)
    final = simulator._result_states()[0]  # sum_j x_j / sum_j w_j: the exact mean, 1
    assert _offset(simulator, final) == pytest.approx(1.0, abs=1e-5)


def test_push_sum_converges_to_the_mean_where_row_stochastic_mixing_is_biased():
    rounds = 30
    push = _simulator(mixing_matrix(PATH, "push_sum"), "mix_then_train", push_sum=True, rounds=rounds)
    plain = _simulator(mixing_matrix(PATH, "uniform"), "mix_then_train", rounds=rounds)
    push.run()
    plain.run()
    for i in range(3):
        assert _offset(push, push.client_state(i)) == pytest.approx(1.0, abs=1e-4)
        # uniform weights on the path converge to the degree-weighted mean (2*0 + 3*0 + 2*3) / 7
        assert _offset(plain, plain.client_state(i)) == pytest.approx(6 / 7, abs=1e-4)


def test_push_sum_on_a_regular_graph_is_plain_averaging_and_resumes(tmp_path):
    ring = np.ones((3, 3), dtype=bool) & ~np.eye(3, dtype=bool)  # every |A_i| = 3: P = W, weights stay 1
    push = _simulator(mixing_matrix(ring, "push_sum"), "mix_then_train", push_sum=True, lr=0.5, rounds=2,
                      checkpoint_dir=tmp_path)
    plain = _simulator(mixing_matrix(ring, "uniform"), "mix_then_train", lr=0.5, rounds=2)
    first, reference = push.run(), plain.run()
    for key, value in reference.final_state.items():
        if value.is_floating_point():
            torch.testing.assert_close(first.final_state[key], value, atol=1e-5, rtol=1e-5)
    again = _simulator(mixing_matrix(ring, "push_sum"), "mix_then_train", push_sum=True, lr=0.5, rounds=2,
                       checkpoint_dir=tmp_path)
    resumed = again.run()
    assert resumed.resumed_rounds == 2 and torch.equal(again.push_weights, push.push_weights)
    for key, value in first.final_state.items():
        assert torch.equal(resumed.final_state[key], value), key


def test_a_push_sum_matrix_must_be_column_stochastic():
    with pytest.raises(ValueError, match="column-stochastic"):
        _simulator(mixing_matrix(PATH, "uniform"), "mix_then_train", push_sum=True)
    with pytest.raises(ValueError, match="row-stochastic"):
        _simulator(mixing_matrix(PATH, "push_sum"), "mix_then_train")
    with pytest.raises(ValueError, match="order"):
        DecLConfig(rounds=1, order="gossip_first").validate()

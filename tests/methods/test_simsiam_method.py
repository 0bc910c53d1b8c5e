"""SimSiam: negative cosine loss by hand, stop-gradient, head sizes."""

import math

import pytest
import torch

from dssl.methods import create_method
from dssl.methods.simsiam import NegativeCosineLoss, negative_cosine


def test_negative_cosine_by_hand():
    p = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    z = torch.tensor([[1.0, 1.0], [0.0, -2.0]])
    # cos = 1/sqrt(2) and -1 -> D = -(1/sqrt(2) - 1) / 2
    expected = -(1 / math.sqrt(2) - 1) / 2
    assert negative_cosine(p, z).item() == pytest.approx(expected)


def test_symmetric_loss_by_hand():
    p1, z2 = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])  # cos 0
    p2, z1 = torch.tensor([[3.0, 4.0]]), torch.tensor([[3.0, 0.0]])  # cos 3/5
    assert NegativeCosineLoss()(p1, p2, z1, z2).item() == pytest.approx(0.5 * 0 + 0.5 * -0.6)


def test_stop_gradient_blocks_the_target_branch():
    p = torch.tensor([[1.0, 0.0]], requires_grad=True)
    z = torch.tensor([[1.0, 1.0]], requires_grad=True)
    negative_cosine(p, z).backward()
    assert z.grad is None
    # d/dp cos(p, z) = z / (|p||z|) - cos * p / |p|^2 = (1, 1)/sqrt(2) - (1, 0)/sqrt(2) = (0, 1/sqrt(2))
    torch.testing.assert_close(p.grad, torch.tensor([[0.0, -1 / math.sqrt(2)]]))


def test_without_stop_gradient_the_target_gets_a_gradient():
    p = torch.tensor([[1.0, 0.0]], requires_grad=True)
    z = torch.tensor([[1.0, 1.0]], requires_grad=True)
    negative_cosine(p, z, stop_gradient=False).backward()
    # Roles swapped: d/dz cos = p / (|p||z|) - cos * z / |z|^2
    #                        = (1, 0) / sqrt(2) - (1, 1) / (2 sqrt(2))
    s = 1 / math.sqrt(2)
    torch.testing.assert_close(z.grad, -torch.tensor([[s - s / 2, -s / 2]]))


def _linear_dims(seq):
    return [(m.in_features, m.out_features) for m in seq if isinstance(m, torch.nn.Linear)]


def test_paper_a_head_sizes_for_resnet18():
    model = create_method("simsiam", "resnet18_cifar", 16, 1)
    assert _linear_dims(model.projector) == [(512, 256), (256, 256), (256, 512)]
    assert _linear_dims(model.predictor) == [(512, 512), (512, 512)]


def test_scaled_head_sizes_and_overrides():
    model = create_method("simsiam", "cnn_small", 16, 1)
    assert _linear_dims(model.projector) == [(128, 64), (64, 64), (64, 128)]
    assert _linear_dims(model.predictor) == [(128, 128), (128, 128)]
    model = create_method("simsiam", "cnn_small", 16, 1, proj_output_dim=32, pred_hidden_dim=8)
    assert _linear_dims(model.predictor) == [(32, 8), (8, 32)]


def test_predictor_is_the_local_state():
    model = create_method("simsiam", "cnn_small", 16, 1)
    keys = model.local_state_keys()
    assert keys and all(k.startswith("predictor.") for k in keys)
    assert {k for k in model.state_dict() if k.startswith("predictor.")} == set(keys)

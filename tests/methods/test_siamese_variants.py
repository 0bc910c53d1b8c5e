"""BYOL, SimCLR and MoCo parts: losses by hand, EMA target, queue."""

import math

import pytest
import torch
import torch.nn.functional as F

from dssl.methods import create_method
from dssl.methods.byol import BYOLLoss
from dssl.methods.moco import InfoNCELoss
from dssl.methods.simclr import NTXentLoss
from dssl.models import count_parameters


def test_byol_loss_by_hand():
    p1, t2 = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]])  # cos 1 -> 0
    p2, t1 = torch.tensor([[0.0, 1.0]]), torch.tensor([[1.0, 0.0]])  # cos 0 -> 2
    assert BYOLLoss()(p1, p2, t1, t2).item() == pytest.approx(2.0)


def test_ntxent_by_hand():
    # Two images, 2-d embeddings; views of image 0 coincide, views of image 1 are orthogonal to them.
    z1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    z2 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    t = 0.5
    # Each view: positive logit 1/t, negatives: one at 0 (the other image, two views: 0 and 0).
    expected = -math.log(math.exp(1 / t) / (math.exp(1 / t) + 2 * math.exp(0)))
    assert NTXentLoss(t)(z1, z2).item() == pytest.approx(expected)


def test_infonce_by_hand():
    q = torch.tensor([[1.0, 0.0]])
    k = torch.tensor([[1.0, 0.0]])
    queue = torch.tensor([[0.0, -1.0], [1.0, 0.0]])  # two negatives: cos 0 and -1
    t = 0.2
    expected = -math.log(math.exp(1 / t) / (math.exp(1 / t) + math.exp(0) + math.exp(-1 / t)))
    assert InfoNCELoss(t)(q, k, queue).item() == pytest.approx(expected, rel=1e-4)  # float32


def test_byol_target_follows_the_online_network_by_ema():
    model = create_method("byol", "cnn_small", 16, 1)
    online = model.encoder.features[0].weight
    target = model.target_encoder.features[0].weight
    assert torch.equal(online, target) and not target.requires_grad
    before = target.clone()
    with torch.no_grad():
        online.add_(1.0)
    model.update_target(0.25)
    torch.testing.assert_close(target, 0.25 * before + 0.75 * online)
    keys = model.client_state_keys()
    assert keys and all(k.split(".")[0] in {"target_encoder", "target_projector"} for k in keys)
    assert all(k.startswith("predictor.") for k in model.local_state_keys())


def test_moco_queue_wraps_around():
    model = create_method("moco", "cnn_small", 16, 1, queue_size=5, proj_output_dim=2)
    keys = F.normalize(torch.rand(3, 2), dim=-1)
    model.enqueue(keys)
    model.enqueue(keys)
    assert model.queue_ptr.item() == 1
    torch.testing.assert_close(model.queue[:, 0], keys[2])  # slot 0 overwritten on the wrap
    torch.testing.assert_close(model.queue[:, 3:5], keys[:2].T)
    assert {"queue", "queue_ptr"} <= set(model.client_state_keys())
    assert any(k.startswith("key_encoder.") for k in model.client_state_keys())


def test_byol_resnet18_matches_paper_a_table2_size():
    # Paper A's Table 2 lists FedU / FedEMA (BYOL, ResNet-18) at 38.47 M, rounded to 0.01 M.
    # Trainable (the EMA target is not): encoder 11,176,512
    # + projector 512 x 4096 + 4096, BN 2 x 4096, 4096 x 2048 + 2048 = 10,500,096
    # + predictor 2048 x 4096 + 4096, BN 2 x 4096, 4096 x 2048 + 2048 = 16,791,552 -> 38,468,160.
    model = create_method("byol", "resnet18_imagenet", 224, 3)
    assert count_parameters(model) == 38_468_160
    assert abs(count_parameters(model) / 1e6 - 38.47) <= 0.005

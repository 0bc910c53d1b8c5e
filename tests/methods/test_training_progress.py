"""A few optimiser steps on a fixed batch lower each grid method's loss; digit views take no flips."""

import pytest
import torch

from dssl.methods import create_method


def _digit_like_batch(num: int = 32) -> torch.Tensor:
    """Bars at varying positions on a dark background: structured enough to learn from."""
    g = torch.Generator().manual_seed(0)
    images = torch.rand(num, 1, 16, 16, generator=g) * 0.1
    for i in range(num):
        images[i, 0, 2 + i % 8:5 + i % 8, 3:13] = 1.0
    return images


@pytest.mark.parametrize(("name", "backbone", "lr"), [("simsiam", "cnn_small", 0.05), ("mae_cnn", "cnn_small", 0.05),
                                                      ("mae", "vit_small", 1e-3)])
def test_loss_decreases_over_a_few_steps(name, backbone, lr):
    torch.manual_seed(0)
    model = create_method(name, backbone, image_size=16, in_chans=1, flip_p=0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9) if backbone == "cnn_small" \
        else torch.optim.AdamW(model.parameters(), lr=lr)
    images = _digit_like_batch()

    def loss(step: int, train: bool) -> torch.Tensor:
        # The same views and masks at every evaluation, so only the weights change the value.
        out = model.training_loss(images, generator=torch.Generator().manual_seed(1000 + step if train else 0))
        return out["loss"]

    with torch.no_grad():
        before = float(loss(0, train=False))
    for step in range(15):
        value = loss(step, train=True)
        optimizer.zero_grad()
        value.backward()
        optimizer.step()
    with torch.no_grad():
        after = float(loss(0, train=False))
    assert after < before - 0.05 * abs(before), (before, after)


@pytest.mark.parametrize("name", ["simsiam", "mae", "mae_cnn", "simclr", "byol", "moco"])
def test_flip_probability_is_a_hyper_parameter(name):
    backbone = "vit_small" if name == "mae" else "cnn_small"
    assert create_method(name, backbone, 16, 1).transform.flip_p == 0.5
    model = create_method(name, backbone, 16, 1, flip_p=0.0)
    assert model.transform.flip_p == 0.0 and model.hparams["flip_p"] == 0.0


def test_digit_datasets_take_no_flips():
    from dssl.data.datasets import DATASETS

    for name in ("digits", "digits_on_photos"):
        assert DATASETS[name].view_hparams == {"flip_p": 0.0}
    assert DATASETS["cifar10"].view_hparams == {}

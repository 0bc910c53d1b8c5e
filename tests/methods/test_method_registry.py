"""Every declared method on the small backbones: finite loss that backpropagates, shapes, names."""

import pytest
import torch

from dssl.config.methods import METHOD_SPECS
from dssl.methods import SSLMethod, create_method

PAIRS = [
    ("simsiam", "cnn_small"),
    ("simsiam", "vit_small"),
    ("mae", "vit_small"),
    ("mae_cnn", "cnn_small"),
    ("byol", "cnn_small"),
    ("simclr", "vit_small"),
    ("moco", "cnn_small"),
    ("orchestra", "cnn_small"),
]


def test_every_method_is_covered():
    assert {name for name, _ in PAIRS} == set(METHOD_SPECS.names())


@pytest.mark.parametrize(("name", "backbone"), PAIRS)
def test_training_loss_backpropagates(name, backbone):
    torch.manual_seed(0)
    model = create_method(name, backbone, image_size=16, in_chans=1)
    assert isinstance(model, SSLMethod) and model.name == name
    images = torch.rand(4, 1, 16, 16)
    out = model.training_loss(images, with_representation=True)
    assert out["loss"].ndim == 0 and torch.isfinite(out["loss"])
    dim = model.encoder.feature_dim
    assert out["representation"].shape == (4, dim)
    out["loss"].backward()
    grads = [p.grad for p in model.encoder.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
    model.after_optimizer_step()
    assert model.encoder(images).shape == (4, dim)
    assert model.representation(images).shape == (4, dim)
    assert set(model.training_loss(images)) >= {"loss"}


@pytest.mark.parametrize("name", ["simsiam", "mae"])
def test_loss_is_reproducible_with_a_generator(name):
    model = create_method(name, "vit_small", 16, 1)
    images = torch.rand(4, 1, 16, 16)

    def loss(seed):
        return model.training_loss(images, generator=torch.Generator().manual_seed(seed))["loss"]

    assert torch.equal(loss(0), loss(0))
    assert not torch.equal(loss(0), loss(1))


def test_hparams_are_resolved_and_overridable():
    model = create_method("mae", "vit_small", 16, 1, mask_ratio=0.5, decoder_dim=32)
    assert model.hparams["mask_ratio"] == 0.5 and model.hparams["decoder_dim"] == 32
    assert model.hparams["decoder_heads"] == 4


def test_unknown_names_list_the_known_ones():
    with pytest.raises(KeyError, match="known: byol, mae, mae_cnn, moco, orchestra, simclr, simsiam"):
        create_method("dino", "cnn_small", 16, 1)
    with pytest.raises(ValueError, match="known: cnn_small"):
        create_method("simsiam", "resnet50", 16, 1)
    with pytest.raises(ValueError, match=r"its options: mask_ratio"):
        create_method("mae", "vit_small", 16, 1, mask_rate=0.5)

"""Paper B's design-space switches of the Siamese methods: predictor, stop-gradient, EMA target, MoCo v1/v2."""

import pytest
import torch
import torch.nn.functional as F

from dssl.methods import create_method
from dssl.methods.byol import BYOLLoss


def views(model, images, seed):
    g = torch.Generator().manual_seed(seed)
    return model.transform(images, g), model.transform(images, g)


def loss_of(model, images, seed):
    return model.training_loss(images, generator=torch.Generator().manual_seed(seed))["loss"]


@pytest.mark.parametrize("name", ["byol", "simsiam"])
def test_predictor_off_removes_the_predictor_from_model_and_loss(name):
    torch.manual_seed(0)
    model = create_method(name, "cnn_small", 8, 1, predictor=False)
    assert model.predictor is None and not model.part_keys("predictor")
    assert not any(k.startswith("predictor") for k in model.state_dict())
    images = torch.rand(4, 1, 8, 8)
    x1, x2 = views(model, images, 3)
    z1, z2 = model.projector(model.encoder(x1)), model.projector(model.encoder(x2))
    with torch.no_grad():
        if name == "byol":
            t1 = model.target_projector(model.target_encoder(x1))
            t2 = model.target_projector(model.target_encoder(x2))
            expected = BYOLLoss()(z1, z2, t1, t2)  # the projections are compared directly
        else:
            expected = -F.cosine_similarity(z1, z2, dim=-1).mean()  # 0.5 D(z1, z2) + 0.5 D(z2, z1)
    torch.testing.assert_close(loss_of(model, images, 3), expected)


def test_byol_without_stop_gradient_sends_the_gradient_into_the_target():
    images = torch.rand(4, 1, 8, 8)
    grads = {}
    for sg in (True, False):
        torch.manual_seed(0)
        model = create_method("byol", "cnn_small", 8, 1, stop_gradient=sg)
        loss_of(model, images, 1).backward()
        grads[sg] = [p.grad for p in model.target_encoder.parameters()]
        assert all(p.requires_grad is (not sg) for p in model.target_encoder.parameters())
    assert all(g is None for g in grads[True])
    assert all(g is not None for g in grads[False]) and any(g.abs().sum() > 0 for g in grads[False])


def test_simsiam_without_stop_gradient_differentiates_both_branches():
    images = torch.rand(4, 1, 8, 8)
    grads = {}
    for sg in (True, False):
        torch.manual_seed(0)
        model = create_method("simsiam", "cnn_small", 8, 1, stop_gradient=sg)
        loss_of(model, images, 1).backward()
        grads[sg] = model.encoder.features[0].weight.grad.clone()
    assert not torch.allclose(grads[True], grads[False])


def test_byol_without_ema_target_compares_with_the_online_projections():
    torch.manual_seed(0)
    model = create_method("byol", "cnn_small", 8, 1, ema_target=False)
    assert model.target_encoder is None and not model.part_keys("target") and not model.client_state_keys()
    images = torch.rand(4, 1, 8, 8)
    x1, x2 = views(model, images, 5)
    z1, z2 = model.projector(model.encoder(x1)), model.projector(model.encoder(x2))
    expected = BYOLLoss()(model.predictor(z1), model.predictor(z2), z1, z2)
    torch.testing.assert_close(loss_of(model, images, 5), expected)


def test_simsiam_with_ema_target_moves_the_target_by_momentum():
    torch.manual_seed(0)
    model = create_method("simsiam", "cnn_small", 8, 1, ema_target=True, momentum=0.9)
    keys = model.part_keys("target")
    assert keys and set(keys) <= set(model.client_state_keys())
    assert model.online_key_of("target_encoder.features.0.weight") == "encoder.features.0.weight"
    before = model.target_encoder.features[0].weight.clone()
    with torch.no_grad():
        model.encoder.features[0].weight.add_(1.0)
    model.after_optimizer_step()
    torch.testing.assert_close(model.target_encoder.features[0].weight,
                               0.9 * before + 0.1 * model.encoder.features[0].weight)
    assert create_method("simsiam", "cnn_small", 8, 1).target_encoder is None  # off by default


def test_simsiam_logs_its_collapse_diagnostic_and_byol_only_its_loss():
    images = torch.rand(4, 1, 8, 8)
    torch.manual_seed(0)
    simsiam = create_method("simsiam", "cnn_small", 8, 1)
    losses = simsiam.training_loss(images, generator=torch.Generator().manual_seed(2))
    x1, _ = views(simsiam, images, 2)
    z1 = simsiam.projector(simsiam.encoder(x1))
    expected = F.normalize(z1, dim=-1).std(dim=0).mean()  # SimSiam Fig. 2: ~1/sqrt(d), 0 at collapse
    assert set(losses) == {"loss", "output_std"} and not losses["output_std"].requires_grad
    torch.testing.assert_close(losses["output_std"], expected.detach())
    byol = create_method("byol", "cnn_small", 8, 1)
    assert set(byol.training_loss(images, generator=torch.Generator().manual_seed(2))) == {"loss"}


def test_moco_versions():
    v1 = create_method("moco", "cnn_small", 8, 1, version="v1")
    v2 = create_method("moco", "cnn_small", 8, 1)
    assert v1.hparams["temperature"] == 0.07 and v2.hparams["temperature"] == 0.2
    assert [type(m).__name__ for m in v1.projector] == ["Linear"]
    assert len([m for m in v2.projector if isinstance(m, torch.nn.Linear)]) == 2
    assert create_method("moco", "cnn_small", 8, 1, version="v1", temperature=0.5).hparams["temperature"] == 0.5
    with pytest.raises(ValueError, match="version: must be one of 'v1', 'v2', got 'v3'"):
        create_method("moco", "cnn_small", 8, 1, version="v3")


def test_unknown_switch_names_fail_loudly():
    with pytest.raises(ValueError, match="has no option"):
        create_method("simclr", "cnn_small", 8, 1, predictor=False)  # SimCLR has no predictor switch
    with pytest.raises(ValueError, match="has no option"):
        create_method("byol", "cnn_small", 8, 1, stop_grad=False)


def test_part_keys_cover_the_model_once():
    model = create_method("moco", "cnn_small", 8, 1)
    parts = [model.part_keys(p) for p in ("online", "predictor", "target", "memory")]
    assert sorted(sum(parts, [])) == sorted(model.state_dict())
    assert parts[3] == ["queue", "queue_ptr"]
    with pytest.raises(ValueError, match="unknown model part"):
        model.part_keys("decoder")


def test_paper_b_heads_and_augmentation_for_simsiam_and_simclr():
    from torch import nn

    from dssl.methods.augment import FedSSLTransform
    from dssl.methods.simsiam import SimSiamTransform

    torch.manual_seed(0)
    code = create_method("simsiam", "cnn_small", 8, 1, heads="fedssl", augmentation="fedssl")
    linears = [(m.in_features, m.out_features) for m in code.projector.modules() if isinstance(m, nn.Linear)]
    assert linears == [(128, 1024), (1024, 512)]   # paper B's 512-4096-2048 at d = 128: d-8d-4d
    assert ([(m.in_features, m.out_features) for m in code.predictor if isinstance(m, nn.Linear)]
            == [(512, 1024), (1024, 512)])
    assert not any(isinstance(m, nn.BatchNorm1d) and not m.affine for m in code.projector.modules())   # no output BN
    assert type(code.transform) is FedSSLTransform and code.transform.crop_scale == (0.08, 1.0)
    default = create_method("simsiam", "cnn_small", 8, 1)
    assert type(default.transform) is SimSiamTransform and default.transform.crop_scale == (0.2, 1.0)
    assert default.hparams["proj_output_dim"] == 128 and default.hparams["heads"] == "simsiam"
    linear = create_method("simclr", "cnn_small", 8, 1, head="linear")
    assert [type(m) for m in linear.projector] == [nn.Linear] and linear.projector[0].out_features == 32
    with pytest.raises(ValueError, match="heads: must be one of 'simsiam', 'fedssl', got 'byol'"):
        create_method("simsiam", "cnn_small", 8, 1, heads="byol")

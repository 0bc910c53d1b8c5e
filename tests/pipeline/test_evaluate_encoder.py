"""The encoder an evaluation stage scores: seed s's pretrained weights or the backbone seed s started from,
with the same ViT features (``evaluate.vit_pool``) for both."""

from __future__ import annotations

import torch

from dssl.pipeline.evaluate import _encoder


def test_vit_pool_applies_to_random_init_and_pretrained_encoders_alike(tmp_path) -> None:
    random_init = _encoder("vit_small", 8, 1, None, seed=3, device="cpu", vit_pool="avg")
    weights = tmp_path / "encoder.pt"
    torch.save({k: v + 1.0 for k, v in random_init.state_dict().items()}, weights)
    pretrained = _encoder("vit_small", 8, 1, weights, seed=3, device="cpu", vit_pool="avg")
    assert random_init.global_pool == pretrained.global_pool == "avg"
    # without the key: the class token
    assert _encoder("vit_small", 8, 1, None, seed=3, device="cpu").global_pool == "token"
    x = torch.rand(2, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(pretrained.eval()(x), pretrained.forward_features(x)[:, 1:].mean(dim=1))


def test_the_cnn_ignores_vit_pool() -> None:
    cnn = _encoder("cnn_small", 8, 1, None, seed=0, device="cpu", vit_pool="avg")
    assert cnn(torch.rand(2, 1, 8, 8)).shape == (2, 128)

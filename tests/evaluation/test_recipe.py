"""MAE's fine-tuning recipe on hand-computed values: layer-decay lr scales of a tiny ViT, the soft-target
loss, the lr schedule, the per-family / per-dataset configs of the paper profile, and a fine-tuning whose
training set is kept on the device. (The augmentations against timm: test_batch_augment.py.)"""

from __future__ import annotations

import math

import pytest
import torch
from evaluation_helpers import separable_images

from dssl.config.protocols import PROTOCOL_SPECS
from dssl.evaluation import evaluate
from dssl.evaluation.configs import FineTuneConfig
from dssl.evaluation.finetune import Classifier, _optimizer, lr_factor
from dssl.evaluation.recipe import soft_cross_entropy
from dssl.models.backbones import create_backbone

pytestmark = pytest.mark.usefixtures("single_thread")


def _vit_classifier(pool: str = "avg") -> Classifier:
    torch.manual_seed(0)
    return Classifier(create_backbone("vit_small", 8, 1, depth=2), 3, pool)


def _scale_of(optimizer: torch.optim.Optimizer, parameter: torch.Tensor) -> tuple[float, float]:
    group = next(g for g in optimizer.param_groups if any(p is parameter for p in g["params"]))
    return group["lr"], group["weight_decay"]


def test_layer_decay_scales_a_tiny_vit_by_depth():
    model = _vit_classifier()
    cfg = FineTuneConfig(layer_decay=0.75, weight_decay=0.05, exclude_norm_bias_from_decay=True)
    optimizer = _optimizer(model, cfg, lr=1e-3)
    vit = model.encoder
    # depth 2: patch embedding and class token are layer 0, block i layer i + 1, the rest layer 3
    expected = {vit.patch_embed.proj.weight: (1e-3 * 0.75 ** 3, 0.05), vit.cls_token: (1e-3 * 0.75 ** 3, 0.0),
                vit.blocks[0].attn.qkv.weight: (1e-3 * 0.75 ** 2, 0.05),
                vit.blocks[0].norm1.weight: (1e-3 * 0.5625, 0.0),
                vit.blocks[1].mlp.fc1.weight: (1e-3 * 0.75, 0.05), vit.blocks[1].mlp.fc1.bias: (1e-3 * 0.75, 0.0),
                vit.norm.weight: (1e-3, 0.0), model.fc_norm.weight: (1e-3, 0.0), model.head.weight: (1e-3, 0.05),
                model.head.bias: (1e-3, 0.0)}
    for parameter, (lr, decay) in expected.items():
        got_lr, got_decay = _scale_of(optimizer, parameter)
        assert got_lr == pytest.approx(lr, rel=1e-12) and got_decay == decay
    trained = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert id(vit.pos_embed) not in trained  # fixed sin-cos embedding: not a parameter to train
    assert trained == {id(p) for p in model.parameters() if p.requires_grad}


def test_without_the_recipe_the_optimizer_is_one_group_of_every_parameter():
    model = _vit_classifier("token")
    optimizer = _optimizer(model, FineTuneConfig(), lr=1e-3)
    assert len(optimizer.param_groups) == 1 and model.fc_norm is None
    assert [id(p) for p in optimizer.param_groups[0]["params"]] == [id(p) for p in model.parameters()]


def test_layer_decay_on_a_cnn_is_refused_before_training():
    train = separable_images(30, seed=0, size=8)
    with pytest.raises(ValueError, match=r"\['layer_decay', 'pool: avg'\] apply to ViT encoders only.*per_family.vit"):
        evaluate("finetune", create_backbone("cnn_small", 8, 1), train, train, {"layer_decay": 0.75, "pool": "avg"})


def test_avg_pooling_is_the_mean_patch_token_through_a_fresh_layer_norm():
    model = _vit_classifier()
    x = torch.rand(2, 1, 8, 8)
    vit = model.encoder
    tokens = vit.blocks(vit.norm_pre(vit._pos_embed(vit.patch_embed(x))))
    expected = torch.nn.functional.layer_norm(tokens[:, 1:].mean(dim=1), (vit.embed_dim,), eps=1e-6)
    assert torch.allclose(model.features(x), expected, atol=1e-6)


def test_soft_cross_entropy_of_one_hot_targets_is_cross_entropy():
    logits = torch.tensor([[2.0, 0.0, -1.0]])
    soft = soft_cross_entropy(logits, torch.tensor([[0.0, 1.0, 0.0]]))
    assert soft.item() == pytest.approx(-math.log(math.exp(0) / (math.exp(2) + 1 + math.exp(-1))))


def test_lr_schedule_warms_up_then_decays_to_its_floor_or_stays():
    assert lr_factor(0, 4, 10) == 0.25 and lr_factor(3, 4, 10) == 1.0
    assert lr_factor(4, 4, 10) == 1.0 and lr_factor(7, 4, 10) == pytest.approx(0.5)
    assert lr_factor(10, 4, 10, min_ratio=0.1) == pytest.approx(0.1)
    assert lr_factor(7, 4, 10, min_ratio=0.1) == pytest.approx(0.1 + 0.9 * 0.5)
    assert lr_factor(9, 4, 10, "constant") == 1.0


def test_the_learning_rate_scales_with_the_batch_when_a_reference_is_set():
    assert FineTuneConfig(batch_size=1024, lr_reference_batch=256).learning_rate(1e-3) == pytest.approx(4e-3)
    assert FineTuneConfig(batch_size=1024).learning_rate(1e-3) == 1e-3


def test_a_training_set_kept_on_the_device_fine_tunes_to_the_same_bits(monkeypatch):
    from dssl.data.batches import DeviceBatches, ResidentBatches

    train, test = separable_images(80, seed=1, size=8), separable_images(30, seed=2, size=8)
    config = {"epochs": 2, "lr_grid": [3e-3], "batch_size": 16, "crop": "resized", "hflip": True,
              "rand_augment": "rand-m9-mstd0.5-inc1", "random_erasing": 0.25, "mixup": 0.8, "cutmix": 1.0,
              "label_smoothing": 0.1}

    def run():
        torch.manual_seed(0)
        return evaluate("finetune", create_backbone("cnn_small", 8, 1), train, test, config, seed=1)

    readers = []
    monkeypatch.setattr(DeviceBatches, "__call__", _recording(DeviceBatches.__call__, readers, "read"))
    monkeypatch.setattr(ResidentBatches, "__call__", _recording(ResidentBatches.__call__, readers, "kept"))
    read = run()
    monkeypatch.setattr(ResidentBatches, "fits", staticmethod(lambda images, device: True))   # as on a GPU
    kept = run()
    assert kept == read and "kept" in readers and readers.index("kept") > readers.index("read")


def _recording(call, log: list, name: str):
    def recorded(self, *args, **kwargs):
        log.append(name)
        return call(self, *args, **kwargs)
    return recorded


def test_the_paper_profile_resolves_its_recipes_per_family_and_dataset():
    from dssl.config.params import read_params
    from dssl.pipeline.evaluate import protocol_config

    params = read_params("configs/paper.yaml")
    vit_cifar100 = protocol_config(params, "finetune", "cifar100", "tiny_vit")
    assert (vit_cifar100.epochs, vit_cifar100.batch_size, vit_cifar100.layer_decay) == (100, 256, 0.75)
    assert (vit_cifar100.mixup, vit_cifar100.cutmix, vit_cifar100.rand_augment) == (0.8, 1.0, "rand-m9-mstd0.5-inc1")
    assert vit_cifar100.lr_grid == (1e-3,) and vit_cifar100.learning_rate(1e-3) == pytest.approx(1e-3)
    cnn_imagenet = protocol_config(params, "finetune", "imagenet", "resnet18_imagenet")
    assert (cnn_imagenet.optimizer, cnn_imagenet.epochs, cnn_imagenet.batch_size, cnn_imagenet.layer_decay) == \
        ("sgd", 20, 1024, 1.0)
    assert cnn_imagenet.learning_rate(1e-3) == pytest.approx(4e-3)
    assert protocol_config(params, "finetune", "cifar10", "tiny_vit").epochs == 50
    assert (vit_cifar100.device, vit_cifar100.precision) == ("cuda", "bf16")
    assert PROTOCOL_SPECS["finetune"].make_config(params["evaluate"]["finetune"]).epochs == 50  # no dataset: the base

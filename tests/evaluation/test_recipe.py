"""MAE's fine-tuning recipe on hand-computed values: layer-decay lr scales of a tiny ViT, mixup and
cutmix targets and boxes, the soft-target loss, the lr schedule, random erasing, RandAugment's seeding,
and the per-family / per-dataset configs of the paper profile."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from evaluation_helpers import separable_images

from dssl.evaluation import PROTOCOLS, evaluate
from dssl.evaluation.configs import FineTuneConfig
from dssl.evaluation.finetune import Classifier, _optimizer, lr_factor
from dssl.evaluation.recipe import HostRandAugment, cutmix_box, mix_batch, random_erasing, soft_cross_entropy
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


class PlannedRng:
    """A numpy-Generator stand-in that returns planned draws (to compute mixup by hand)."""

    def __init__(self, random, beta, integers=()):
        self._random, self._beta, self._integers = list(random), beta, list(integers)

    def random(self):
        return self._random.pop(0)

    def beta(self, a, b):
        return self._beta

    def integers(self, low, high):
        return self._integers.pop(0)


def test_mixup_blends_the_batch_with_itself_reversed_and_smooths_the_targets():
    images = torch.arange(2 * 4, dtype=torch.float32).view(2, 1, 2, 2)
    labels = torch.tensor([0, 2])
    cfg = FineTuneConfig(mixup=0.8, cutmix=0.0, label_smoothing=0.1)
    mixed, targets = mix_batch(images, labels, 3, cfg, PlannedRng(random=[0.5], beta=0.7))
    assert torch.allclose(mixed[0], 0.7 * images[0] + 0.3 * images[1])
    off, on = 0.1 / 3, 1 - 0.1 + 0.1 / 3   # label smoothing: 0.0333 off, 0.9333 on
    assert torch.allclose(targets[0], torch.tensor([0.7 * on + 0.3 * off, off, 0.7 * off + 0.3 * on]))
    assert torch.allclose(targets.sum(dim=1), torch.ones(2))


def test_cutmix_pastes_a_box_and_lambda_is_the_share_left():
    # lam 0.75: cut ratio sqrt(0.25) = 0.5 of an 8 x 8 image: a 4 x 4 box centred at (2, 6)
    assert cutmix_box(8, 8, 0.75, PlannedRng([], 0, integers=[2, 6])) == ((0, 4, 4, 8), 1 - 16 / 64)
    # centred in a corner it is clipped: rows 0..2, columns 0..2 -> 4 pixels pasted
    assert cutmix_box(8, 8, 0.75, PlannedRng([], 0, integers=[0, 0])) == ((0, 2, 0, 2), 1 - 4 / 64)
    images = torch.stack([torch.zeros(1, 8, 8), torch.ones(1, 8, 8)])
    cfg = FineTuneConfig(mixup=0.0, cutmix=1.0)
    mixed, targets = mix_batch(images, torch.tensor([0, 1]), 2, cfg, PlannedRng([0.5], 0.75, integers=[2, 6]))
    assert mixed[0, 0, 0:4, 4:8].eq(1).all() and mixed[0].sum() == 16 and mixed[1].sum() == 64 - 16
    assert torch.allclose(targets, torch.tensor([[0.75, 0.25], [0.25, 0.75]]))


def test_no_mix_when_the_draw_is_above_mixup_prob():
    images = torch.rand(2, 1, 4, 4)
    cfg = FineTuneConfig(mixup=0.8, cutmix=1.0, mixup_prob=0.3)
    mixed, targets = mix_batch(images, torch.tensor([1, 0]), 2, cfg, PlannedRng([0.9], 0.5))
    assert torch.equal(mixed, images) and torch.equal(targets, torch.tensor([[0.0, 1.0], [1.0, 0.0]]))


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


def test_random_erasing_replaces_one_rectangle_per_chosen_image():
    torch.manual_seed(0)
    images = torch.full((64, 3, 16, 16), 0.5)
    erased = random_erasing(images, 1.0)
    changed = erased.ne(images).any(dim=1)             # [B, H, W]
    assert changed.any(dim=(1, 2)).float().mean() > 0.9   # every image but where no try fits
    for mask in changed[changed.any(dim=(1, 2))]:
        rows, cols = mask.any(dim=1).nonzero().flatten(), mask.any(dim=0).nonzero().flatten()
        box = mask[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
        assert box.float().mean() > 0.95                 # one filled rectangle (a noise pixel may equal 0.5)
        area = len(rows) * len(cols) / 256
        assert 0.02 * 0.5 <= area <= 1 / 3 + 0.1
    assert torch.equal(random_erasing(images, 0.0), images)


def test_rand_augment_is_seeded_per_batch():
    pixels = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (6, 3, 16, 16), dtype=np.uint8))
    augment = HostRandAugment("rand-m9-mstd0.5-inc1", 3, 0, 1)
    first, again = augment(pixels, 4), HostRandAugment("rand-m9-mstd0.5-inc1", 3, 0, 1)(pixels, 4)
    assert first.dtype == torch.uint8 and first.shape == pixels.shape and torch.equal(first, again)
    assert not torch.equal(first, augment(pixels, 5)) and not torch.equal(first, pixels)


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
    assert PROTOCOLS["finetune"].make_config(params["evaluate"]["finetune"]).epochs == 50  # no dataset: the base

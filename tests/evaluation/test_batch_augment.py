"""The batched fine-tuning augmentations against timm's per-image reference (timm 1.0, the recipe's
code): RandAugment's op set, frequencies and arguments (magnitude noise, clipping, the increasing
variants) and each op's pixels; the crop boxes; random erasing's probability and boxes; mixup / cutmix's
switch, lambda and label mixing. Fixed seeds; the bands hold for these seeds with room to spare and
fail on a wrong op set, layer count, probability or level function."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from PIL import Image

from dssl.evaluation import batch_augment as ba
from dssl.evaluation.configs import FineTuneConfig
from dssl.evaluation.finetune import augment

pytestmark = pytest.mark.usefixtures("single_thread")

FILL = (124, 116, 104)   # MAE's img_mean: ImageNet's mean in whole pixel values


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _timm_rand_augment(config: str, images: int) -> tuple[set, list[list[tuple[str, float | None]]]]:
    """timm's op names and, per image, the (op, argument) pairs it applied: each op's function replaced
    by a recorder (its draws are timm's own, from Python's and numpy's global generators)."""
    from timm.data.auto_augment import rand_augment_transform

    transform = rand_augment_transform(config, {"img_mean": FILL})
    seen: list[list] = []

    def recorder(name):
        def record(img, *args, **kwargs):
            seen[-1].append((name, args[0] if args else None))
            return img
        return record

    for op in transform.ops:
        op.aug_fn = recorder(op.name)
    random.seed(0)
    np.random.seed(0)
    picture = Image.new("RGB", (4, 4))
    for _ in range(images):
        seen.append([])
        transform(picture)
    return {op.name for op in transform.ops}, seen


def _ours(config: str, images: int) -> tuple[set, list[list[tuple[str, float]]]]:
    spec = ba.parse_rand_augment(config)
    draws = ba.draw_rand_augment(spec, images, _gen(0))
    per_image = [[(spec.names[o], float(a)) for o, a in zip(ops.tolist(), args.tolist()) if o >= 0]
                 for ops, args in zip(draws.op, draws.arg)]
    return set(spec.names), per_image


def test_the_rand_augment_string_is_read_as_timm_reads_it():
    assert ba.parse_rand_augment("rand-m9-mstd0.5-inc1") == ba.RandAugmentSpec(9, 2, 0.5, 0.5, 10.0, True)
    spec = ba.parse_rand_augment("rand-m5-n3-p0.8-mstd101-mmax12")
    assert (spec.magnitude, spec.num_layers, spec.prob, spec.magnitude_std, spec.magnitude_max, spec.increasing) == \
        (5, 3, 0.8, math.inf, 12, False)
    for bad in ("rand-m9-tweights", "rand-x3", "augmix-m3", "rand-mfoo"):
        with pytest.raises(ValueError, match="rand_augment"):
            ba.parse_rand_augment(bad)


@pytest.mark.parametrize("config", ["rand-m9-mstd0.5-inc1", "rand-m9-mstd0.5", "rand-m7-n3-p0.8-mstd101-inc1",
                                    "rand-m6-mstd0-inc1"])
def test_rand_augment_draws_ops_and_arguments_as_timm(config):
    images = 6000
    timm_names, timm_seen = _timm_rand_augment(config, images)
    names, seen = _ours(config, images)
    assert names == timm_names and len(names) == 15
    spec = ba.parse_rand_augment(config)
    expected = images * spec.num_layers * spec.prob / 15   # uses of each op
    for name in names:
        ours = [arg for image in seen for op, arg in image if op == name]
        theirs = [arg for image in timm_seen for op, arg in image if op == name]
        assert abs(len(ours) - expected) < 0.2 * expected and abs(len(theirs) - expected) < 0.2 * expected, name
        if theirs[0] is None:
            continue
        _assert_same_spread(name, np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float))
    applied = [np.bincount([len(image) for image in side], minlength=spec.num_layers + 1) / images
               for side in (seen, timm_seen)]
    assert np.abs(applied[0] - applied[1]).max() < 0.03   # ops per image: 0, 1, 2 (3) with prob p each


def _assert_same_spread(name: str, ours: np.ndarray, theirs: np.ndarray) -> None:
    """The same share on either side of the op's neutral argument (1 for the enhance factors, else 0) and
    the same distribution (quantiles, spread) of the distance from it: timm's magnitudes and signs."""
    if name.startswith("Posterize"):   # whole bits: the share of each value
        for bits in np.union1d(ours, theirs):
            assert abs(np.mean(ours == bits) - np.mean(theirs == bits)) < 0.03, (name, bits)
        return
    neutral = 1.0 if name.startswith(ba.BLEND) else 0.0
    assert abs((ours < neutral).mean() - (theirs < neutral).mean()) < 0.1, name
    a, b = np.abs(ours - neutral), np.abs(theirs - neutral)
    scale = max(b.max(), 1e-9)
    tolerance = 0.02 * scale + 0.3 * max(a.std(), b.std())
    for q in (0.01, 0.05, 0.5, 0.95, 0.99):
        assert abs(np.quantile(a, q) - np.quantile(b, q)) <= tolerance, (name, q)
    assert abs(a.std() - b.std()) <= 0.35 * max(a.std(), b.std()) + 1e-9, name


def test_the_magnitude_noise_is_clipped_at_timm_s_maximum():
    _, seen = _ours("rand-m9-mstd0.5-inc1", 4000)
    rotations = np.abs([arg for image in seen for op, arg in image if op == "Rotate"])
    bits = [arg for image in seen for op, arg in image if op == "PosterizeIncreasing"]
    assert rotations.max() == 30.0 and 20 < rotations.min() and 26.5 < rotations.mean() < 27.5
    assert set(bits) <= {0.0, 1.0, 2.0} and 0.9 < np.mean(np.equal(bits, 1.0))   # m in [7.5, 10): 1 bit kept


def _test_images() -> torch.Tensor:
    """Smooth colour images (low-resolution noise upsampled) in whole pixel values, one of low contrast."""
    small = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (6, 3, 8, 8)).astype(np.float32))
    images = torch.nn.functional.interpolate(small, size=(32, 32), mode="bilinear", align_corners=False).round()
    images[3] = (images[3] * 0.4 + 60).round()
    return images


def _timm_op(name: str, arg: float, images: torch.Tensor, resample) -> torch.Tensor:
    from timm.data.auto_augment import NAME_TO_OP

    args = () if name in ("AutoContrast", "Equalize", "Invert") else (int(arg),) if name.startswith(
        ("Posterize", "Solarize")) else (arg,)
    out = [np.asarray(NAME_TO_OP[name](Image.fromarray(image.permute(1, 2, 0).numpy().astype(np.uint8)), *args,
                                       fillcolor=FILL, resample=resample)) for image in images]
    return torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2).float()


def _ours_op(name: str, arg: float, images: torch.Tensor) -> torch.Tensor:
    n = len(images)
    draws = ba.RandAugmentDraws(torch.full((n, 1), ba.RAND_OPS.index(name)), torch.full((n, 1), arg,
                                                                                       dtype=torch.float64))
    return ba.rand_augment(images.clone(), draws, FILL)


@pytest.mark.parametrize("name, arg", [("AutoContrast", 0), ("Equalize", 0), ("Invert", 0), ("Posterize", 2),
                                       ("Solarize", 100), ("SolarizeAdd", 80), ("Color", 1.7), ("Color", 0.3),
                                       ("Contrast", 1.6), ("Contrast", 0.2), ("Brightness", 1.5),
                                       ("Sharpness", 1.8), ("Sharpness", 0.1)])
def test_each_colour_op_gives_pil_s_pixels(name, arg):
    images = _test_images()
    difference = (_ours_op(name, arg, images) - _timm_op(name, arg, images, Image.Resampling.BICUBIC)).abs()
    assert difference.max() <= 1 and difference.mean() < 0.01


@pytest.mark.parametrize("name, arg", [("Rotate", 25.0), ("Rotate", -13.0), ("ShearX", 0.25), ("ShearY", -0.2),
                                       ("TranslateXRel", 0.3), ("TranslateYRel", -0.41)])
def test_each_geometric_op_gives_pil_s_pixels(name, arg, monkeypatch):
    images = _test_images()
    bicubic = (_ours_op(name, arg, images) - _timm_op(name, arg, images, Image.Resampling.BICUBIC)).abs()
    assert bicubic.mean() < 1.0 and (bicubic > 8).float().mean() < 0.001   # torch's cubic a = -0.75, PIL's -0.5
    monkeypatch.setattr(ba, "RAND_AUGMENT_INTERPOLATION", "bilinear")   # same kernel: the same geometry and fill
    bilinear = (_ours_op(name, arg, images) - _timm_op(name, arg, images, Image.Resampling.BILINEAR)).abs()
    assert bilinear.max() <= 1


def test_layers_apply_in_turn_and_a_skipped_layer_leaves_the_image():
    images = _test_images()
    ops = torch.tensor([[ba.RAND_OPS.index("Invert"), ba.RAND_OPS.index("Solarize")], [-1, -1]] * 3)
    args = torch.tensor([[0.0, 100.0], [0.0, 0.0]] * 3, dtype=torch.float64)
    out = ba.rand_augment(images.clone(), ba.RandAugmentDraws(ops, args), FILL)
    inverted = 255 - images[0::2]
    assert torch.equal(out[0::2], torch.where(inverted < 100, inverted, 255 - inverted))
    assert torch.equal(out[1::2], images[1::2])


def test_crop_boxes_follow_timm_s_random_resized_crop():
    from timm.data.transforms import RandomResizedCropAndInterpolation

    n, scale, ratio = 4000, (0.08, 1.0), (3 / 4, 4 / 3)
    ours = ba.crop_boxes(n, 32, 32, scale, ratio, _gen(0)).numpy()
    random.seed(0)
    picture = Image.new("RGB", (32, 32))
    theirs = np.array([RandomResizedCropAndInterpolation.get_params(picture, scale, ratio) for _ in range(n)], float)
    for boxes in (ours, theirs):
        assert (boxes[:, 0] >= 0).all() and (boxes[:, 0] + boxes[:, 2] <= 32).all()
        assert (boxes[:, 1] >= 0).all() and (boxes[:, 1] + boxes[:, 3] <= 32).all()
    area = [b[:, 2] * b[:, 3] / 1024 for b in (ours, theirs)]
    aspect = [np.log(b[:, 3] / b[:, 2]) for b in (ours, theirs)]
    centre = [(b[:, 1] + b[:, 3] / 2) / 32 for b in (ours, theirs)]
    for a, b in (area, aspect, centre):
        for q in (0.1, 0.5, 0.9):
            assert abs(np.quantile(a, q) - np.quantile(b, q)) < 0.03
    # no try fits a 40 x 10 image at full area: timm's centre crop of the widest aspect allowed
    fallback = RandomResizedCropAndInterpolation.get_params(Image.new("RGB", (40, 10)), (1.0, 1.0), ratio)
    assert ba.crop_boxes(3, 10, 40, (1.0, 1.0), ratio, _gen(1)).tolist() == [list(map(float, fallback))] * 3


def test_a_full_crop_at_the_stored_size_is_the_image_and_the_flip_mirrors_it():
    images = _test_images()
    same = ba.random_resized_crop(images, 32, (1.0, 1.0), 0.0, _gen(0), ratio=(1.0, 1.0))
    flipped = ba.random_resized_crop(images, 32, (1.0, 1.0), 1.0, _gen(0), ratio=(1.0, 1.0))
    assert torch.equal(same, images) and torch.equal(flipped, images.flip(-1))
    upscaled = ba.random_resized_crop(images, 96, (0.08, 1.0), 0.5, _gen(0))
    assert upscaled.shape == (6, 3, 96, 96) and torch.equal(upscaled, upscaled.round().clamp(0, 255))


def test_random_erasing_erases_as_often_and_as_much_as_timm():
    from timm.data.random_erasing import RandomErasing

    n, side = 4000, 24
    torch.manual_seed(0)
    ours = ba.random_erasing(torch.full((n, 3, side, side), 7.0), 0.25, _gen(0)).ne(7.0).any(dim=1)
    random.seed(0)
    theirs = RandomErasing(0.25, mode="pixel", device="cpu")(torch.full((n, 3, side, side), 7.0)).ne(7.0).any(dim=1)
    stats = []
    for changed in (ours, theirs):
        erased = changed[changed.any(dim=(1, 2))]
        heights = erased.any(dim=2).sum(dim=1).float().numpy()
        widths = erased.any(dim=1).sum(dim=1).float().numpy()
        assert torch.equal(erased.sum(dim=(1, 2)).float(), torch.from_numpy(heights * widths))   # one rectangle
        stats.append((len(erased) / n, heights * widths / side ** 2, np.log(heights / widths)))
    (share, area, aspect), (timm_share, timm_area, timm_aspect) = stats
    assert abs(share - 0.25) < 0.03 and abs(share - timm_share) < 0.03
    for q in (0.1, 0.5, 0.9):
        assert abs(np.quantile(area, q) - np.quantile(timm_area, q)) < 0.03
        assert abs(np.quantile(aspect, q) - np.quantile(timm_aspect, q)) < 0.25
    assert 0.02 * 0.8 <= area.min() and area.max() <= 1 / 3 * 1.2


def test_mixup_and_cutmix_switch_and_draw_lambda_as_timm():
    from scipy import stats
    from timm.data.mixup import Mixup

    n = 20000
    generator = _gen(0)
    ours = [ba.mix_params(224, 224, 0.8, 1.0, 1.0, 0.5, generator) for _ in range(n)]
    np.random.seed(0)
    mixer = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5, label_smoothing=0.1, num_classes=10)
    theirs = [mixer._params_per_batch() for _ in range(n)]
    cut = np.mean([p.cutmix for p in ours])
    assert abs(cut - 0.5) < 0.015 and abs(cut - np.mean([c for _, c in theirs])) < 0.02
    mixup = np.array([p.lam for p in ours if not p.cutmix])
    assert stats.kstest(mixup, stats.beta(0.8, 0.8).cdf).pvalue > 1e-3
    assert abs(mixup.var() - 1 / (4 * 2.6)) < 0.004 and abs(mixup.mean() - 0.5) < 0.01   # Beta(0.8, 0.8), not U(0, 1)
    timm_mixup = np.array([lam for lam, c in theirs if not c])
    assert abs(mixup.var() - timm_mixup.var()) < 0.005
    # cutmix: lambda after the box is clipped (timm's correct_lam) against timm's boxes for its lambdas
    from timm.data.mixup import cutmix_bbox_and_lam

    cut_lams = np.array([p.lam for p in ours if p.cutmix])
    timm_cut = np.array([cutmix_bbox_and_lam((224, 224), lam)[1] for lam, c in theirs if c])
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        assert abs(np.quantile(cut_lams, q) - np.quantile(timm_cut, q)) < 0.03
    for p in ours[:200]:
        if p.cutmix:
            top, bottom, left, right = p.box
            assert p.lam == pytest.approx(1 - (bottom - top) * (right - left) / 224 ** 2)
    rare = np.mean([ba.mix_params(8, 8, 0.8, 1.0, 0.3, 0.5, generator).lam < 1 for _ in range(4000)])
    assert abs(rare - 0.3) < 0.03


def test_mixed_images_and_targets_are_timm_s():
    from timm.data.mixup import mixup_target

    images = torch.rand(4, 3, 8, 8)
    labels = torch.tensor([0, 2, 1, 2])
    mixed, targets = ba.apply_mix(images, labels, 3, 0.1, ba.MixParams(0.7, False))
    assert torch.allclose(mixed, images * 0.7 + images.flip(0) * 0.3)
    assert torch.allclose(targets, mixup_target(labels, 3, 0.7, 0.1)) and torch.allclose(targets.sum(1), torch.ones(4))
    pasted, targets = ba.apply_mix(images, labels, 3, 0.0, ba.MixParams(0.75, True, (0, 4, 4, 8)))
    assert torch.equal(pasted[:, :, 0:4, 4:8], images.flip(0)[:, :, 0:4, 4:8])
    assert torch.equal(pasted[:, :, 4:, :], images[:, :, 4:, :])
    assert torch.allclose(targets, mixup_target(labels, 3, 0.75, 0.0))
    same, one_hot = ba.apply_mix(images, labels, 3, 0.0, ba.MixParams(1.0, False))
    assert torch.equal(same, images) and torch.equal(one_hot.argmax(1), labels)


def test_the_recipe_s_views_are_reproducible_from_the_generator():
    cfg = FineTuneConfig(crop="resized", hflip=True, rand_augment="rand-m9-mstd0.5-inc1", random_erasing=0.25)
    spec = ba.parse_rand_augment(cfg.rand_augment)
    pixels = _test_images()[:, :, :16, :16] / 255

    def views(seed: int) -> torch.Tensor:
        torch.manual_seed(5)
        return augment(pixels, cfg, _gen(seed), 48, spec, "bicubic")

    first = views(0)
    assert first.shape == (6, 3, 48, 48) and torch.equal(first, views(0)) and not torch.equal(first, views(1))


@pytest.mark.parametrize("mode, resample", [("bicubic", Image.Resampling.BICUBIC),
                                            ("bilinear", Image.Resampling.BILINEAR)])
def test_the_crop_is_resized_as_pil_resizes_it(mode, resample):
    images = torch.from_numpy(np.random.default_rng(3).integers(0, 256, (8, 3, 20, 20))).float()
    out = ba.random_resized_crop(images, 48, (0.08, 1.0), 0.5, _gen(4), mode)
    again = _gen(4)
    boxes, flips = ba.crop_boxes(8, 20, 20, (0.08, 1.0), ba.CROP_RATIO, again), torch.rand(
        8, generator=again, dtype=torch.float64) < 0.5
    for image, (top, left, h, w), flip, ours in zip(images, boxes.long().tolist(), flips, out):
        picture = Image.fromarray(image.permute(1, 2, 0).numpy().astype(np.uint8)).crop((left, top, left + w, top + h))
        picture = picture.resize((48, 48), resample)
        reference = torch.from_numpy(np.asarray(picture).copy()).permute(2, 0, 1).float()
        difference = (ours - (reference.flip(-1) if flip else reference)).abs()
        assert difference.max() <= 2 and difference.mean() < 0.3
    shrunk = ba.random_resized_crop(images, 8, (1.0, 1.0), 0.0, _gen(0), mode, ratio=(1.0, 1.0))
    reference = torch.stack([torch.from_numpy(np.asarray(Image.fromarray(i.permute(1, 2, 0).numpy().astype(np.uint8))
                                                         .resize((8, 8), resample)).copy()).permute(2, 0, 1)
                             for i in images]).float()
    assert (shrunk - reference).abs().max() <= 2   # shrinking: PIL's antialias filter

"""Batched view augmentations: identities, per-sample randomness, reproducibility, value range."""

import torch

from dssl.data.views import color_jitter, gaussian_blur, random_grayscale, random_resized_crop
from dssl.methods.augment import FedSSLTransform
from dssl.methods.simsiam import SimSiamTransform


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_full_crop_without_flip_is_the_identity():
    images = torch.rand(3, 2, 8, 8)
    out = random_resized_crop(images, 8, scale=(1, 1), ratio=(1, 1), flip_p=0.0)
    torch.testing.assert_close(out, images)


def test_certain_flip_mirrors_columns():
    images = torch.rand(3, 1, 8, 8)
    out = random_resized_crop(images, 8, scale=(1, 1), ratio=(1, 1), flip_p=1.0)
    torch.testing.assert_close(out, images.flip(-1))


def test_crop_resizes_and_is_per_sample():
    images = torch.rand(1, 3, 32, 32).expand(6, -1, -1, -1)
    out = random_resized_crop(images, 16, generator=gen())
    assert out.shape == (6, 3, 16, 16)
    assert len({tuple(v.flatten().tolist()) for v in out}) == 6


def test_views_are_reproducible_with_a_generator():
    images = torch.rand(4, 3, 16, 16)
    transform = SimSiamTransform(16)
    torch.testing.assert_close(transform(images, gen(5)), transform(images, gen(5)))
    assert not torch.equal(transform(images, gen(5)), transform(images, gen(6)))


def test_jitter_with_p_zero_is_the_identity_and_output_stays_in_range():
    images = torch.rand(4, 3, 8, 8)
    torch.testing.assert_close(color_jitter(images, 0.8, 0.8, 0.8, 0.2, p=0.0), images)
    out = color_jitter(images, 0.8, 0.8, 0.8, 0.2, p=1.0, generator=gen())
    assert out.min() >= 0 and out.max() <= 1 and not torch.allclose(out, images)


def test_zero_hue_shift_keeps_colours():
    images = torch.rand(2, 3, 4, 4)
    torch.testing.assert_close(color_jitter(images, 0, 0, 0, 0, p=1.0), images, atol=1e-5, rtol=0)


def test_grayscale_makes_equal_channels_and_skips_single_channel():
    out = random_grayscale(torch.rand(4, 3, 5, 5), p=1.0)
    torch.testing.assert_close(out[:, 0], out[:, 1])
    gray = torch.rand(2, 1, 5, 5)
    assert random_grayscale(gray, p=1.0) is gray


def test_blur_keeps_constant_images_and_smooths_others():
    constant = torch.full((2, 3, 9, 9), 0.3)
    torch.testing.assert_close(gaussian_blur(constant, 5, p=1.0), constant)
    noise = torch.rand(2, 1, 16, 16, generator=gen())
    blurred = gaussian_blur(noise, 5, sigma=(1.5, 1.5), p=1.0)
    assert blurred.var() < noise.var()
    torch.testing.assert_close(gaussian_blur(noise, 5, p=0.0), noise, atol=1e-6, rtol=0)


def test_single_channel_views():
    images = torch.rand(4, 1, 16, 16)
    for transform in (SimSiamTransform(16), FedSSLTransform(16)):
        out = transform(images, gen())
        assert out.shape == images.shape and out.min() >= 0 and out.max() <= 1

"""Per-client feature augmentation: hand-checkable cases against the definitions and torchvision."""

from __future__ import annotations

import pytest
import torch
import torchvision.transforms.functional as TF

from dssl.data.augment import ClientAugmentation, gaussian_blur, gaussian_kernel1d

OFF = {"brightness": 0.0, "brightness_p": 0.0, "blur_kernel": 5, "blur_sigma": [0.1, 2.0], "blur_p": 0.0,
       "flip_p": 0.0}


def _images(channels: int, batch: int = 6, size: int = 8) -> torch.Tensor:
    return torch.rand(batch, channels, size, size, generator=torch.Generator().manual_seed(channels))


@pytest.mark.parametrize("channels", [1, 3])
def test_zero_probabilities_are_identity(channels: int) -> None:
    images = _images(channels)
    params = {**OFF, "brightness": 0.5}
    out = ClientAugmentation(params)(images, torch.Generator().manual_seed(0))
    assert torch.equal(out, images)


@pytest.mark.parametrize("channels", [1, 3])
def test_brightness_factor_is_applied_exactly(channels: int) -> None:
    augment = ClientAugmentation({**OFF, "brightness": 0.4, "brightness_p": 1.0})
    images = _images(channels)
    draws = augment.draw(len(images), torch.Generator().manual_seed(1))
    assert torch.all((draws.brightness_factor >= 0.6) & (draws.brightness_factor <= 1.4))
    out = augment.apply(images, draws)
    for i, factor in enumerate(draws.brightness_factor):
        assert torch.equal(out[i], (images[i] * factor).clamp(0, 1))
        assert torch.allclose(out[i], TF.adjust_brightness(images[i], float(factor)))


def test_brightness_probability_leaves_others_untouched() -> None:
    augment = ClientAugmentation({**OFF, "brightness": 0.5, "brightness_p": 0.8})
    draws = augment.draw(4000, torch.Generator().manual_seed(2))
    changed = (draws.brightness_factor != 1).float().mean()
    assert abs(changed - 0.8) < 0.03


def test_blur_kernel_sums_to_one_and_matches_torchvision() -> None:
    sigma = torch.tensor([0.1, 0.7, 2.0])
    kernels = gaussian_kernel1d(5, sigma)
    assert torch.allclose(kernels.sum(dim=1), torch.ones(3))
    assert torch.allclose(kernels, kernels.flip(1))
    assert kernels[0, 2] > 0.99  # sigma 0.1: nearly the identity
    image = _images(3, batch=1)[0]
    ours = gaussian_blur(image[None].expand(3, -1, -1, -1), 5, sigma)
    for i, s in enumerate(sigma.tolist()):
        expected = TF.gaussian_blur(image, kernel_size=[5, 5], sigma=[s, s])
        assert torch.allclose(ours[i], expected, atol=1e-6)


def test_blur_keeps_a_constant_image_and_blurs_per_sample() -> None:
    augment = ClientAugmentation({**OFF, "blur_p": 1.0})
    constant = torch.full((2, 1, 8, 8), 0.3)
    assert torch.allclose(augment(constant, torch.Generator().manual_seed(0)), constant)
    images = _images(1, batch=2)
    draws = augment.draw(2, torch.Generator().manual_seed(0))
    out = augment.apply(images, draws)
    for i in range(2):
        sigma = float(draws.blur_sigma[i])
        assert 0.1 <= sigma <= 2.0
        assert torch.allclose(out[i], TF.gaussian_blur(images[i], [5, 5], [sigma, sigma]), atol=1e-6)


def test_flip() -> None:
    images = _images(3)
    assert torch.equal(ClientAugmentation({**OFF, "flip_p": 1.0})(images), images.flip(-1))
    augment = ClientAugmentation({**OFF, "flip_p": 0.5})
    draws = augment.draw(len(images), torch.Generator().manual_seed(5))
    out = augment.apply(images, draws)
    for i, flipped in enumerate(draws.flip_mask):
        assert torch.equal(out[i], images[i].flip(-1) if flipped else images[i])


def test_seeded_generator_repeats_and_output_stays_in_range() -> None:
    params = {"brightness": 0.5, "brightness_p": 0.8, "blur_kernel": 5, "blur_sigma": [0.1, 2.0],
              "blur_p": 0.5, "flip_p": 0.5}
    images = _images(3, batch=16)
    first = ClientAugmentation(params)(images, torch.Generator().manual_seed(9))
    second = ClientAugmentation(params)(images, torch.Generator().manual_seed(9))
    assert torch.equal(first, second) and first.shape == images.shape and first.dtype == images.dtype
    assert first.min() >= 0 and first.max() <= 1
    assert not torch.equal(first, images)


@pytest.mark.parametrize("params, problem", [
    ({**OFF, "contrast": 0.1}, "unknown"),
    ({k: v for k, v in OFF.items() if k != "flip_p"}, "missing"),
    ({**OFF, "blur_kernel": 4}, "odd"),
])
def test_bad_params(params: dict, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ClientAugmentation(params)

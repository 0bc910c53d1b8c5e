"""Batched image augmentations with per-sample randomness, the pieces of the SSL methods' views
(``dssl.methods.augment``) and of fine-tuning's crops (``dssl.evaluation``).

SSL methods make their views from a whole batch at once: each sample draws its own crop, flip and
colour parameters, and a single ``affine_grid``/``grid_sample`` call or elementwise op applies them
all. This replaces torchvision's per-image PIL pipeline and its Python loop over samples, and runs on
whatever device the batch is on. Inputs and outputs are float images in [0, 1], [B, C, H, W]; colour
operations that need RGB (saturation, hue, grayscale) leave single-channel images unchanged.

Every function takes an optional ``torch.Generator``; random numbers are drawn on the generator's
device and then moved, so a seeded generator gives the same views on CPU and GPU.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# ITU-R 601 luma weights, as torchvision's rgb_to_grayscale.
_LUMA = (0.299, 0.587, 0.114)
# RGB <-> YIQ; a hue shift is a rotation of the (I, Q) chroma plane. The inverse is a constant,
# computed once here (in float32 on the CPU, as it was per call): torch.linalg.inv on an accelerator
# checks its result on the host, a sync per call.
_RGB_TO_YIQ = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
_YIQ_TO_RGB = torch.linalg.inv(_RGB_TO_YIQ)


def rand_uniform(
    shape: int | tuple[int, ...],
    low: float,
    high: float,
    device: torch.device,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Uniform draws in [low, high) on ``device``, generated on the generator's device."""
    source = generator.device if generator is not None else device
    u = torch.rand(shape, generator=generator, device=source).to(device, non_blocking=True)
    return low + (high - low) * u


def rand_bernoulli(
    n: int, p: float, device: torch.device, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``n`` independent booleans, each True with probability ``p``."""
    return rand_uniform(n, 0.0, 1.0, device, generator) < p


def to_grayscale(images: torch.Tensor) -> torch.Tensor:
    """[B, 3, H, W] RGB -> [B, 1, H, W] luma; single-channel images are returned as they are."""
    if images.shape[1] != 3:
        return images
    weights = images.new_tensor(_LUMA).view(1, 3, 1, 1)
    return (images * weights).sum(dim=1, keepdim=True)


def random_resized_crop(
    images: torch.Tensor,
    size: int,
    scale: tuple[float, float] = (0.2, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
    flip_p: float = 0.5,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Random-resized crop to ``size`` x ``size`` plus horizontal flip, one affine warp per sample.

    Area fraction ~ U(scale), log aspect ratio ~ U(log ratio), as torchvision's RandomResizedCrop;
    where torchvision retries out-of-bounds crops, the side fractions here are clipped to 1.
    """
    b, c = images.shape[:2]
    device = images.device
    area = rand_uniform(b, *scale, device, generator)
    aspect = rand_uniform(b, math.log(ratio[0]), math.log(ratio[1]), device, generator).exp()
    width = (area * aspect).sqrt().clamp(max=1.0)  # fractions of the image side
    height = (area / aspect).sqrt().clamp(max=1.0)
    # affine_grid works in [-1, 1] coordinates: a crop of fraction w has half-width w there.
    cx = rand_uniform(b, -1.0, 1.0, device, generator) * (1 - width)
    cy = rand_uniform(b, -1.0, 1.0, device, generator) * (1 - height)
    sign = 1.0 - 2.0 * rand_bernoulli(b, flip_p, device, generator).float()
    theta = torch.zeros(b, 2, 3, device=device, dtype=images.dtype)
    theta[:, 0, 0] = width * sign
    theta[:, 0, 2] = cx
    theta[:, 1, 1] = height
    theta[:, 1, 2] = cy
    grid = F.affine_grid(theta, [b, c, size, size], align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)


def _jitter_factors(
    strength: float, apply: torch.Tensor, generator: torch.Generator | None
) -> torch.Tensor:
    """Per-sample factors ~ U[max(0, 1 - s), 1 + s] where ``apply``, else 1; shaped [B, 1, 1, 1]."""
    f = rand_uniform(apply.numel(), max(0.0, 1 - strength), 1 + strength, apply.device, generator)
    return torch.where(apply, f, torch.ones_like(f)).view(-1, 1, 1, 1)


def _rotate_hue(images: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotate each sample's chroma by ``angle`` radians in YIQ space (a linear hue shift)."""
    to_yiq = _RGB_TO_YIQ.to(images, non_blocking=True)
    cos, sin = angle.cos(), angle.sin()
    rot = torch.zeros(angle.numel(), 3, 3, device=images.device, dtype=images.dtype)
    rot[:, 0, 0] = 1
    rot[:, 1, 1], rot[:, 1, 2] = cos, -sin
    rot[:, 2, 1], rot[:, 2, 2] = sin, cos
    matrix = _YIQ_TO_RGB.to(images, non_blocking=True) @ rot @ to_yiq
    return torch.einsum("bij,bjhw->bihw", matrix, images)


def color_jitter(
    images: torch.Tensor,
    brightness: float,
    contrast: float,
    saturation: float,
    hue: float,
    p: float = 0.8,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """torchvision-style ColorJitter applied to each sample with probability ``p``.

    Brightness, contrast, saturation and hue in this fixed order (torchvision permutes them per image);
    hue is shifted by rotating YIQ chroma, a linear stand-in for torchvision's HSV round trip.
    """
    device = images.device
    apply = rand_bernoulli(images.shape[0], p, device, generator)
    x = (images * _jitter_factors(brightness, apply, generator)).clamp(0, 1)
    mean = to_grayscale(x).mean(dim=(1, 2, 3), keepdim=True)
    x = ((x - mean) * _jitter_factors(contrast, apply, generator) + mean).clamp(0, 1)
    if x.shape[1] != 3:
        return x
    gray = to_grayscale(x)
    x = ((x - gray) * _jitter_factors(saturation, apply, generator) + gray).clamp(0, 1)
    angle = rand_uniform(x.shape[0], -hue, hue, device, generator) * 2 * math.pi
    return _rotate_hue(x, torch.where(apply, angle, torch.zeros_like(angle))).clamp(0, 1)


def random_grayscale(
    images: torch.Tensor, p: float = 0.2, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Replace each RGB sample by its luma (repeated on 3 channels) with probability ``p``."""
    if images.shape[1] != 3:
        return images
    apply = rand_bernoulli(images.shape[0], p, images.device, generator).view(-1, 1, 1, 1)
    return torch.where(apply, to_grayscale(images).expand_as(images), images)


def gaussian_blur(
    images: torch.Tensor,
    kernel_size: int,
    sigma: tuple[float, float] = (0.1, 2.0),
    p: float = 0.5,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Separable Gaussian blur with per-sample sigma ~ U(sigma), applied with probability ``p``.

    One grouped convolution per axis blurs the whole batch (each sample-channel is its own group).
    """
    if kernel_size < 3:
        return images
    b, c, h, w = images.shape
    device = images.device
    apply = rand_bernoulli(b, p, device, generator)
    std = rand_uniform(b, *sigma, device, generator)
    # A tiny std gives a delta kernel: the identity for samples that are not blurred.
    std = torch.where(apply, std, torch.full_like(std, 1e-3))
    half = kernel_size // 2
    offsets = torch.arange(-half, half + 1, device=device, dtype=images.dtype)
    kernel = torch.exp(-(offsets[None, :] ** 2) / (2 * std[:, None] ** 2))
    kernel = (kernel / kernel.sum(dim=1, keepdim=True)).repeat_interleave(c, dim=0)  # [B*C, k]
    x = F.pad(images.reshape(1, b * c, h, w), (half, half, half, half), mode="reflect")
    x = F.conv2d(x, kernel.view(b * c, 1, kernel_size, 1), groups=b * c)
    x = F.conv2d(x, kernel.view(b * c, 1, 1, kernel_size), groups=b * c)
    return x.view(b, c, h, w)


def blur_kernel_size(image_size: int) -> int:
    """Odd kernel of about 10 % of the image side: 23 at 224 px, as in SimCLR / SimSiam."""
    return int(0.1 * image_size) // 2 * 2 + 1

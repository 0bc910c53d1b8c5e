"""Handwritten digits blended onto natural colour photographs: the builder of ``digits_on_photos``.

The construction is that of MNIST-M (Ganin et al., 2016, "Domain-Adversarial Training of Neural
Networks", JMLR 17(59)): a digit is combined with a random crop of a colour photograph as

    output pixel = |photo_crop - digit|   per channel,

with the digit scaled to 0..255 and repeated over the three channels. Strokes keep their shape but
take the colours and texture of the photograph, so raw pixels (and random features) separate the
classes far worse than on the plain digits, while a representation invariant to colour and texture
still does well.

Sources, both shipped inside scikit-learn (no download): the 8x8 handwritten digits of
``sklearn.datasets.load_digits`` and the two colour photographs of
``sklearn.datasets.load_sample_images`` (china.jpg and flower.jpg, 427 x 640 RGB).

Every integer here is computed exactly, so the output bytes are the same on any machine:
- upscaling is bilinear in integer arithmetic (exact weights, one rounding half up at the end);
- crop positions and photograph choices are integer draws of numpy's ``Generator`` (PCG64);
- the absolute difference is taken in int16.
The one outside dependency is the JPEG decoder that turns the photographs into pixels (Pillow's
libjpeg); ``photo_fingerprints`` records the md5 of the decoded pixels so a different decoder shows
up in ``meta.json`` instead of going unnoticed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DIGIT_SIDE = 8  # load_digits images are 8 x 8
DIGIT_LEVELS = 16  # load_digits intensities are integers 0..16


@dataclass(frozen=True)
class Photos:
    """The colour photographs composites are drawn on: uint8 ``[H, W, 3]`` arrays and their file names."""

    images: tuple[np.ndarray, ...]
    names: tuple[str, ...]

    @property
    def smallest_side(self) -> int:
        return min(min(image.shape[:2]) for image in self.images)


def load_photos() -> Photos:
    """scikit-learn's sample photographs (china.jpg, flower.jpg), in the sorted order sklearn returns.

    The order fixes what the integers of the ``photo`` array mean (0 = china.jpg, 1 = flower.jpg).
    """
    from sklearn.datasets import load_sample_images

    bunch = load_sample_images()
    images = tuple(np.ascontiguousarray(image, dtype=np.uint8) for image in bunch.images)
    for name, image in zip(bunch.filenames, images):
        if image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"{Path(name).name}: expected an RGB photograph, got shape {image.shape}")
    return Photos(images, tuple(Path(name).name for name in bunch.filenames))


def photo_fingerprints(photos: Photos) -> list[dict]:
    """Name, shape and md5 of the decoded pixels of each photograph (for ``meta.json``)."""
    return [{"name": name, "shape": list(image.shape), "pixels_md5": hashlib.md5(image.tobytes()).hexdigest()}
            for name, image in zip(photos.names, photos.images)]


def bilinear_weights(size_in: int, size_out: int) -> np.ndarray:
    """Integer ``[size_out, size_in]`` bilinear weights, each row summing to ``2 * size_out``.

    Half-pixel centres, as torch's ``interpolate(..., align_corners=False)`` and PIL use: output pixel
    ``i`` samples the input at ``x = (i + 0.5) * size_in / size_out - 0.5``, clamped to the border.
    Multiplying by ``2 * size_out`` makes ``x`` an integer, so the weights are exact and no pixel hinges
    on the last bit of a float.
    """
    scale = 2 * size_out
    weights = np.zeros((size_out, size_in), dtype=np.int64)
    for i in range(size_out):
        position = max((2 * i + 1) * size_in - size_out, 0)  # x * scale
        left, fraction = divmod(position, scale)
        right = min(left + 1, size_in - 1)
        weights[i, left] += scale - fraction
        weights[i, right] += fraction
    return weights


def upscale_digits(levels: np.ndarray, size: int) -> np.ndarray:
    """``[N, 8, 8]`` digit intensities 0..16 as uint8 ``[N, size, size]`` images 0..255 (bilinear).

    Bilinear rather than nearest: nearest turns each of the 64 pixels into a hard-edged block, a grid
    of straight edges that a network could latch on to; bilinear gives smooth strokes like MNIST's
    anti-aliased digits, and matches how the pipeline enlarges plain digits (``ResizedImageSet``).
    The interpolation and the 0..16 -> 0..255 scaling share one exact rounding (half up), the same
    rounding the ``digits`` dataset uses, so at the 8 x 8 grid points the values agree with it.
    """
    weights = bilinear_weights(levels.shape[-1], size)
    numerator = np.einsum("yi,nij,xj->nyx", weights, levels.astype(np.int64), weights)  # exact: int64
    denominator = DIGIT_LEVELS * (2 * size) ** 2
    return ((numerator * 255 + denominator // 2) // denominator).astype(np.uint8)


@dataclass(frozen=True)
class Crops:
    """Where each composite's background comes from: photograph index and top-left corner."""

    photo: np.ndarray  # int64 [N]
    top: np.ndarray  # int64 [N]
    left: np.ndarray  # int64 [N]


def draw_crops(count: int, size: int, photos: Photos, rng: np.random.Generator) -> Crops:
    """A uniformly chosen photograph and a uniform ``size`` x ``size`` crop position in it, per composite.

    Integer draws only (``Generator.integers``), so the positions are the same on every machine.
    """
    heights = np.array([image.shape[0] for image in photos.images], dtype=np.int64)
    widths = np.array([image.shape[1] for image in photos.images], dtype=np.int64)
    photo = rng.integers(0, len(photos.images), size=count, dtype=np.int64)
    top = rng.integers(0, heights[photo] - size + 1, dtype=np.int64)
    left = rng.integers(0, widths[photo] - size + 1, dtype=np.int64)
    return Crops(photo, top, left)


def compose(digits: np.ndarray, crops: Crops, photos: Photos) -> np.ndarray:
    """uint8 ``[N, S, S, 3]`` composites ``|photo_crop - digit|`` (Ganin et al., 2016, MNIST-M).

    ``digits`` are uint8 ``[N, S, S]``; the difference is taken in int16 so it neither wraps around
    (as a uint8 subtraction would) nor saturates.
    """
    size = digits.shape[-1]
    out = np.empty((len(digits), size, size, 3), dtype=np.uint8)
    for n, (p, top, left) in enumerate(zip(crops.photo, crops.top, crops.left)):
        crop = photos.images[p][top:top + size, left:left + size].astype(np.int16)
        out[n] = np.abs(crop - digits[n].astype(np.int16)[..., None])
    return out


def composites_of_copy(digits: np.ndarray, photos: Photos,
                       rng: np.random.Generator) -> tuple[np.ndarray, Crops]:
    """One composite of every digit (each on its own random crop): images and their crops.

    Called once per copy, in copy order, over *all* source digits: the composites of a digit then
    depend on the seed, the image size and the digit's position in ``load_digits`` only, not on the
    train/test split, and raising ``composites_per_digit`` keeps the earlier copies unchanged.
    """
    crops = draw_crops(len(digits), digits.shape[-1], photos, rng)
    return compose(digits, crops, photos), crops

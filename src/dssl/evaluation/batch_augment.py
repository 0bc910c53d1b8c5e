"""The fine-tuning recipes' augmentations, batched on the training device with per-sample randomness.

MAE's fine-tuning recipe (He et al., 2022, arXiv 2111.06377, appendix A.2; its code builds the views
with timm's ``create_transform``) makes each training view on the host, image by image in PIL: a
random-resized crop to the model's size (bicubic) and a horizontal flip, RandAugment
``rand-m9-mstd0.5-inc1`` on that crop, then on tensors random erasing (p 0.25, per-pixel noise), and per
batch mixup / cutmix with label smoothing. One reader thread doing that per image cannot keep an
accelerator busy at 224 px. Here each step takes a whole ``[B, C, H, W]`` batch on its device, after the
crop as MAE's pipeline applies it. Every random parameter is drawn on the host from one
``torch.Generator`` (the same views on any device for one seed; the generator's state resumes them;
nothing waits for the device) and reaches the device in one copy; only random erasing's noise is drawn
on the device, from its global RNG (which a run checkpoints).

The ops are timm 1.0's per-image reference (``timm.data``), computed batched in torch on whole pixel
values 0..255 (each op rounds as PIL does, so that the value-based ops see the levels they would):

- ``random_resized_crop``: timm's ``RandomResizedCropAndInterpolation`` box (10 tries of an area share
  ~ U(scale) and a log aspect ratio ~ U(log 3/4, log 4/3), sides rounded to whole pixels; the centre crop
  when none fits), resized and flipped by one warp per sample. Bicubic is torch's (a = -0.75; PIL's is
  -0.5) and reads pixels around the box; shrinking has no antialias filter (PIL's resize has one).
- ``RandAugment`` (Cubuk et al., 2020, arXiv 1909.13719) as ``rand_augment_transform``: per image and
  layer an op drawn uniformly from the 15 of timm's set (``inc1``: the increasing variants), applied
  with probability ``p``, magnitude ~ N(m, mstd) (uniform on [0, m] when mstd > 100) clipped to
  [0, mmax], signed at random where timm negates, mapped to the op's argument by timm's level functions.
  Geometric ops (rotate, shear, translate) are one bicubic warp per sample with timm's fill (the
  recipe's mean colour); a magnitude of 10 posterizes to 0 bits (black, as TensorFlow's RandAugment;
  Pillow >= 10 refuses 0 bits).
- ``random_erasing`` (Zhong et al., 2020, arXiv 1708.04896) as ``RandomErasing(mode="pixel")``.
- ``mix_params`` / ``apply_mix``: mixup (Zhang et al., 2018, arXiv 1710.09412) or CutMix (Yun et al.,
  2019, arXiv 1905.04899) of the batch with itself reversed, as ``Mixup(mode="batch")``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from dssl.data.batches import IMAGENET_MEAN, IMAGENET_STD

LEVEL_DENOM = 10.0   # timm's magnitude scale: an op's full strength at magnitude 10
RAND_OPS = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "SolarizeAdd", "Color",
            "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")
INCREASING = {name: f"{name}Increasing" for name in ("Posterize", "Solarize", "Color", "Contrast", "Brightness",
                                                      "Sharpness")}
GEOMETRIC = ("Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")
LOOKUP = ("AutoContrast", "Equalize", "Invert", "Posterize", "Solarize", "SolarizeAdd")
BLEND = ("Color", "Contrast", "Brightness", "Sharpness")
SIGNED = ("Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")   # and the increasing blends
RAND_AUGMENT_INTERPOLATION = "bicubic"   # MAE's recipe sets it for RandAugment's geometric ops
CROP_RATIO = (3 / 4, 4 / 3)
CROP_TRIES = 10
ERASE_AREA = (0.02, 1 / 3)
ERASE_ASPECT = (0.3, 1 / 0.3)
ERASE_TRIES = 10
_RA_SECTION = re.compile(r"(mstd|mmax|inc|m|n|p)(\d.*)")


@dataclass(frozen=True)
class RandAugmentSpec:
    """A parsed timm RandAugment string (``rand_augment_transform``'s defaults where a section is absent)."""

    magnitude: float = 10.0
    num_layers: int = 2
    prob: float = 0.5
    magnitude_std: float = 0.0
    magnitude_max: float = LEVEL_DENOM
    increasing: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        """timm's names of the ops, in ``RAND_OPS`` order (the increasing variants with ``inc1``)."""
        return tuple(INCREASING.get(name, name) if self.increasing else name for name in RAND_OPS)


def parse_rand_augment(config: str) -> RandAugmentSpec:
    """The spec of a timm string such as ``rand-m9-mstd0.5-inc1``; a clear ``ValueError`` otherwise."""
    parts = config.split("-")
    hint = ("sections m<magnitude>, n<layers>, p<probability>, mstd<std>, mmax<max>, inc<0|1> (timm's "
            "weighted transform sets 't...' are not supported)")
    if parts[0] != "rand":
        raise ValueError(f"rand_augment {config!r} must start with 'rand-'; {hint}")
    values: dict = {}
    for part in parts[1:]:
        match = _RA_SECTION.fullmatch(part)
        try:
            key, text = match.groups() if match else (None, "")
            number = float(text) if key in ("mstd", "p") else int(text)
        except (ValueError, TypeError):
            raise ValueError(f"rand_augment {config!r}: cannot read section {part!r}; {hint}") from None
        if key == "mstd":
            values["magnitude_std"] = math.inf if number > 100 else number
        else:
            values[{"m": "magnitude", "n": "num_layers", "p": "prob", "mmax": "magnitude_max",
                    "inc": "increasing"}[key]] = bool(number) if key == "inc" else number
    return RandAugmentSpec(**values)


@dataclass(frozen=True)
class RandAugmentDraws:
    """One batch's RandAugment draws, on the host: ``op`` ``[B, L]`` (index into ``RAND_OPS``; -1 where
    the layer's op is skipped) and ``arg`` ``[B, L]`` (the op's argument, as timm's level function makes
    it: degrees, shear factor, translation share, bits, threshold, added value or enhance factor)."""

    op: torch.Tensor
    arg: torch.Tensor


def draw_rand_augment(spec: RandAugmentSpec, batch: int, generator: torch.Generator | None = None) -> RandAugmentDraws:
    """Per sample and layer: the op, whether it applies, its magnitude and sign, and its argument."""
    shape = (batch, spec.num_layers)
    op = torch.randint(len(RAND_OPS), shape, generator=generator)
    applied = torch.rand(shape, generator=generator, dtype=torch.float64) <= spec.prob
    magnitude = torch.full(shape, float(spec.magnitude), dtype=torch.float64)
    if spec.magnitude_std == math.inf:
        magnitude = torch.rand(shape, generator=generator, dtype=torch.float64) * spec.magnitude
    elif spec.magnitude_std > 0:
        magnitude = magnitude + spec.magnitude_std * torch.randn(shape, generator=generator, dtype=torch.float64)
    magnitude = magnitude.clamp(0.0, float(spec.magnitude_max))
    sign = torch.where(torch.rand(shape, generator=generator, dtype=torch.float64) > 0.5, -1.0, 1.0)
    arg = level_to_arg(op, magnitude, sign, spec.increasing)
    return RandAugmentDraws(torch.where(applied, op, -1), arg)


def level_to_arg(op: torch.Tensor, magnitude: torch.Tensor, sign: torch.Tensor, increasing: bool) -> torch.Tensor:
    """timm's ``LEVEL_TO_ARG`` for every op at once (float64, so its ``int()`` truncations agree)."""
    level = magnitude / LEVEL_DENOM
    posterize = torch.floor(level * 4)
    solarize = torch.floor(level * 256).clamp(max=256)
    enhance = (1.0 + sign * level * 0.9).clamp(min=0.1) if increasing else level * 1.8 + 0.1
    args = {"Rotate": sign * level * 30.0, "ShearX": sign * level * 0.3, "ShearY": sign * level * 0.3,
            "TranslateXRel": sign * level * 0.45, "TranslateYRel": sign * level * 0.45,
            "Posterize": 4 - posterize if increasing else posterize,
            "Solarize": 256 - solarize if increasing else solarize,
            "SolarizeAdd": torch.floor(level * 110).clamp(max=128),
            **{name: enhance for name in BLEND}}
    out = torch.zeros_like(magnitude)
    for name, value in args.items():
        out = torch.where(op == RAND_OPS.index(name), value, out)
    return out


def rand_augment_fill(channels: int) -> tuple[float, ...]:
    """The fill of the geometric ops: the recipe's mean colour in whole pixel values (MAE's ``img_mean``),
    mid-grey for other channel counts."""
    return tuple(float(round(255 * m)) for m in IMAGENET_MEAN) if channels == 3 else (128.0,) * channels


def rand_augment(images: torch.Tensor, draws: RandAugmentDraws, fill: Sequence[float] | None = None) -> torch.Tensor:
    """``images`` (float ``[B, C, H, W]`` of whole pixel values 0..255, changed in place and returned) after
    each layer's ops. A layer's samples are grouped (the geometric ops together: one warp; each other op
    apart), each group one batched computation; the groups are read from the host-side draws, so they
    cost no sync with the device."""
    fill = rand_augment_fill(images.shape[1]) if fill is None else fill
    kinds = [(GEOMETRIC, _geometric)] + [((name,), _lookup) for name in LOOKUP] + [((name,), _blend) for name in BLEND]
    plan = []   # per layer and kind with samples: the function, the ops present, rows / ops / args packed
    for layer in range(draws.op.shape[1]):
        op, arg = draws.op[:, layer], draws.arg[:, layer]
        for names, apply in kinds:
            rows = torch.isin(op, torch.tensor([RAND_OPS.index(n) for n in names])).nonzero().flatten()
            if len(rows):
                plan.append((apply, set(op[rows].tolist()), torch.stack([rows.double(), op[rows].double(), arg[rows]])))
    moved = to_device([packed for *_, packed in plan], images.device)
    for (apply, present, _), packed in zip(plan, moved):
        index = packed[0].long()
        images.index_copy_(0, index, apply(images.index_select(0, index), packed[1].long(), packed[2], present, fill))
    return images


def to_device(tensors: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """Host tensors as float32 on ``device`` in one copy (from pinned memory on an accelerator, without
    waiting), each back in its shape."""
    if not tensors:
        return []
    flat = torch.cat([t.reshape(-1).float() for t in tensors])
    if device.type == "cuda":
        flat = flat.pin_memory()
    flat = flat.to(device, non_blocking=True)
    return [part.view(t.shape) for part, t in zip(flat.split([t.numel() for t in tensors]), tensors)]


def _is(op: torch.Tensor, name: str) -> torch.Tensor:
    return op == RAND_OPS.index(name)


def _geometric(x: torch.Tensor, op: torch.Tensor, arg: torch.Tensor, present: set,
               fill: Sequence[float]) -> torch.Tensor:
    """PIL's affine transforms as timm calls them: input pixel = (a X + b Y + c, d X + e Y + f) of the output
    pixel (X, Y), continuous coordinates; rotation about the centre, counter-clockwise by ``arg`` degrees;
    shear and translation about the top-left corner. Outside the image: ``fill``; bicubic inside."""
    n, c, h, w = x.shape
    angle = -arg * (math.pi / 180)
    cos, sin = torch.where(_is(op, "Rotate"), angle.cos(), 1.0), torch.where(_is(op, "Rotate"), angle.sin(), 0.0)
    shear_x, shear_y = torch.where(_is(op, "ShearX"), arg, 0.0), torch.where(_is(op, "ShearY"), arg, 0.0)
    a, b, d, e = cos, sin + shear_x, -sin + shear_y, cos
    rotate_c = torch.where(_is(op, "Rotate"), -a * w / 2 - b * h / 2 + w / 2, 0.0)
    rotate_f = torch.where(_is(op, "Rotate"), -d * w / 2 - e * h / 2 + h / 2, 0.0)
    cc = rotate_c + torch.where(_is(op, "TranslateXRel"), arg * w, 0.0)
    f = rotate_f + torch.where(_is(op, "TranslateYRel"), arg * h, 0.0)
    # affine_grid's coordinates are u = 2 X / w - 1, v = 2 Y / h - 1 (align_corners=False)
    theta = torch.stack([torch.stack([a, b * h / w, a + b * h / w + 2 * cc / w - 1], dim=1),
                         torch.stack([d * w / h, e, d * w / h + e + 2 * f / h - 1], dim=1)], dim=1)
    grid = F.affine_grid(theta, [n, c, h, w], align_corners=False)
    out = F.grid_sample(x, grid, mode=RAND_AUGMENT_INTERPOLATION, padding_mode="border", align_corners=False)
    source_x, source_y = (grid[..., 0] + 1) * (w / 2), (grid[..., 1] + 1) * (h / 2)
    inside = ((source_x >= 0) & (source_x < w) & (source_y >= 0) & (source_y < h))[:, None]
    return torch.where(inside, out.round_().clamp_(0, 255), x.new_tensor(fill).view(1, c, 1, 1))


def _lookup(x: torch.Tensor, op: torch.Tensor, arg: torch.Tensor, present: set, fill: Sequence[float]) -> torch.Tensor:
    """The ops that map each level through a per-channel table (PIL's ``ImageOps``): built for every
    sample and channel ``[n, C, 256]``, applied with one gather."""
    n, c, h, w = x.shape
    levels = x.long().view(n, c, h * w)
    i = torch.arange(256, device=x.device, dtype=x.dtype).expand(n, c, 256)
    a = arg.view(n, 1, 1)
    shift = torch.pow(2.0, 8 - a.clamp(max=8))
    tables = {"Invert": 255 - i,
              "Posterize": torch.floor(i / shift) * shift,
              "Solarize": torch.where(i < a, i, 255 - i),
              "SolarizeAdd": torch.where(i < 128, (i + a).clamp(max=255), i)}
    if {RAND_OPS.index("AutoContrast"), RAND_OPS.index("Equalize")} & present:
        hist = torch.zeros(n * c, 256, device=x.device).scatter_add_(
            1, levels.view(n * c, -1), torch.ones(1, device=x.device).expand(n * c, h * w)).view(n, c, 256)
        tables["AutoContrast"], tables["Equalize"] = _auto_contrast_table(hist, i), _equalize_table(hist, i)
    table = i
    for name, value in tables.items():
        table = torch.where(_is(op, name).view(n, 1, 1), value, table)
    return table.gather(2, levels).view(n, c, h, w)


def _auto_contrast_table(hist: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    """``ImageOps.autocontrast``: the lowest and highest level present stretched to 0 and 255."""
    present = hist > 0
    low = present.float().argmax(dim=-1, keepdim=True).to(i.dtype)
    high = 255 - present.flip(-1).float().argmax(dim=-1, keepdim=True).to(i.dtype)
    scale = 255.0 / (high - low).clamp(min=1)
    stretched = torch.trunc(i * scale - low * scale).clamp(0, 255)
    return torch.where(high > low, stretched, i)


def _equalize_table(hist: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    """``ImageOps.equalize``: level l -> (step // 2 + pixels below l) // step, step = (pixels less those of
    the highest level present) // 255; unchanged where step is 0."""
    counts = hist.long()
    high = 255 - (counts > 0).flip(-1).long().argmax(dim=-1, keepdim=True)
    step = (counts.sum(dim=-1, keepdim=True) - counts.gather(-1, high)) // 255
    below = counts.cumsum(dim=-1) - counts
    table = ((step // 2 + below) // step.clamp(min=1)).clamp(max=255).to(i.dtype)
    return torch.where(step > 0, table, i)


def _blend(x: torch.Tensor, op: torch.Tensor, arg: torch.Tensor, present: set, fill: Sequence[float]) -> torch.Tensor:
    """``ImageEnhance``: each image blended with a degenerate one by ``arg`` (PIL's ``Image.blend``,
    truncated): its grey version (Color), its mean grey level (Contrast), black (Brightness), its 3 x 3
    smoothing (Sharpness)."""
    n, c = x.shape[:2]

    def gray() -> torch.Tensor:
        return _luma(x) if c == 3 else x

    builders = {"Color": lambda: gray().expand_as(x),
                "Contrast": lambda: torch.floor(gray().mean(dim=(1, 2, 3), keepdim=True) + 0.5),
                "Brightness": lambda: x.new_zeros(()), "Sharpness": lambda: _smooth(x)}
    names = [name for name in BLEND if RAND_OPS.index(name) in present]
    degenerate = builders[names[0]]()
    for name in names[1:]:
        degenerate = torch.where(_is(op, name).view(n, 1, 1, 1), builders[name](), degenerate)
    factor = arg.view(n, 1, 1, 1)
    return torch.floor((degenerate + factor * (x - degenerate)).clamp_(0, 255))


def _luma(x: torch.Tensor) -> torch.Tensor:
    """PIL's RGB -> L: (19595 R + 38470 G + 7471 B + 2^15) >> 16 (exact in float32 for 8-bit levels)."""
    weights = x.new_tensor([19595.0, 38470.0, 7471.0]).view(1, 3, 1, 1)
    return torch.floor(((x * weights).sum(dim=1, keepdim=True) + 32768.0) / 65536.0)


def _smooth(x: torch.Tensor) -> torch.Tensor:
    """PIL's ``ImageFilter.SMOOTH`` (3 x 3, centre 5, the rest 1, over 13), rounded; the border rows and
    columns are left as they are, as PIL leaves them."""
    c = x.shape[1]
    kernel = x.new_ones(3, 3)
    kernel[1, 1] = 5.0
    smoothed = F.conv2d(x, (kernel / 13.0).expand(c, 1, 3, 3), groups=c)
    out = x.clone()
    out[:, :, 1:-1, 1:-1] = torch.floor(smoothed + 0.5).clamp_(0, 255)
    return out


def crop_boxes(batch: int, height: int, width: int, scale: tuple[float, float],
               ratio: tuple[float, float] = CROP_RATIO, generator: torch.Generator | None = None) -> torch.Tensor:
    """timm's ``RandomResizedCropAndInterpolation.get_params`` per sample: ``[B, 4]`` float64 rows (top,
    left, height, width) in whole pixels."""
    area = torch.empty(batch, CROP_TRIES, dtype=torch.float64).uniform_(*scale, generator=generator) * height * width
    log_ratio = torch.empty(batch, CROP_TRIES, dtype=torch.float64).uniform_(
        math.log(ratio[0]), math.log(ratio[1]), generator=generator)
    box_w, box_h = (area * log_ratio.exp()).sqrt().round(), (area / log_ratio.exp()).sqrt().round()
    fits = (box_w <= width) & (box_h <= height)
    first = fits.long().argmax(dim=1, keepdim=True)      # the first try that fits
    box_h, box_w = box_h.gather(1, first).squeeze(1), box_w.gather(1, first).squeeze(1)
    top = (torch.rand(batch, generator=generator, dtype=torch.float64) * (height - box_h + 1)).floor()
    left = (torch.rand(batch, generator=generator, dtype=torch.float64) * (width - box_w + 1)).floor()
    centre = _centre_crop(height, width, ratio)
    none_fits = ~fits.any(dim=1)
    boxes = torch.stack([top, left, box_h, box_w], dim=1)
    return torch.where(none_fits[:, None], torch.tensor(centre, dtype=torch.float64), boxes)


def _centre_crop(height: int, width: int, ratio: tuple[float, float]) -> tuple[float, float, float, float]:
    """timm's fallback: the largest centred box within the aspect-ratio range."""
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, round(width / min(ratio))
    elif in_ratio > max(ratio):
        w, h = round(height * max(ratio)), height
    else:
        w, h = width, height
    return float((height - h) // 2), float((width - w) // 2), float(h), float(w)


def random_resized_crop(images: torch.Tensor, size: int, scale: tuple[float, float], flip_p: float,
                        generator: torch.Generator | None = None, mode: str = "bicubic",
                        ratio: tuple[float, float] = CROP_RATIO) -> torch.Tensor:
    """Each image's crop box (``crop_boxes``) resized to ``size`` x ``size`` as PIL resizes a crop
    (``resample_weights``: ``bicubic``, MAE's, or ``bilinear``, torchvision's default; rows then columns,
    each pass rounded to whole pixel values as PIL's 8-bit passes) and flipped with probability ``flip_p``:
    two batched matrix products per batch. Whole pixel values (0..255 floats) in and out."""
    b, c, h, w = images.shape
    boxes = crop_boxes(b, h, w, scale, ratio, generator)
    flip = torch.rand(b, generator=generator, dtype=torch.float64) < flip_p
    top, left, box_h, box_w, flip = to_device([*boxes.unbind(1), flip], images.device)
    across = resample_weights(left, box_w, w, size, mode).to(images.dtype)     # [B, size, w]
    across = torch.where(flip.bool()[:, None, None], across.flip(1), across)
    down = resample_weights(top, box_h, h, size, mode).to(images.dtype)        # [B, size, h]
    rows = (images @ across.transpose(1, 2)[:, None]).round_().clamp_(0, 255)   # [B, C, h, size]
    return (down[:, None] @ rows).round_().clamp_(0, 255)


def resample_weights(start: torch.Tensor, length: torch.Tensor, extent: int, size: int, mode: str) -> torch.Tensor:
    """PIL's resampling coefficients (``precompute_coeffs``) of a crop ``[start, start + length)`` of an axis
    of ``extent`` pixels to ``size``, per sample ``[B, size, extent]``: output pixel o reads the crop around
    centre start + (o + 0.5) * scale through the filter (bicubic a = -0.5 or triangle) widened by the
    shrink factor when shrinking (its antialias), taps outside the crop dropped and the rest normalised."""
    scale = (length / size)[:, None, None]
    widen = scale.clamp(min=1.0)
    centre = start[:, None, None] + (torch.arange(size, device=start.device, dtype=start.dtype)[None, :, None]
                                     + 0.5) * scale
    x = ((torch.arange(extent, device=start.device, dtype=start.dtype)[None, None, :] + 0.5 - centre) / widen).abs()
    if mode == "bicubic":
        a = -0.5
        weights = torch.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                              torch.where(x < 2, (((x - 5) * x + 8) * x - 4) * a, torch.zeros_like(x)))
    elif mode == "bilinear":
        weights = (1 - x).clamp(min=0)
    else:
        raise ValueError(f"unknown crop interpolation {mode!r}; known: bicubic, bilinear")
    j = torch.arange(extent, device=start.device, dtype=start.dtype)[None, None, :]
    inside = (j >= start[:, None, None]) & (j < (start + length)[:, None, None])
    weights = torch.where(inside, weights, torch.zeros_like(weights))
    return weights / weights.sum(dim=-1, keepdim=True)


def random_erasing(images: torch.Tensor, probability: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """timm's ``RandomErasing(mode="pixel")`` on [0, 1] images: each image, with ``probability``, gets one
    rectangle of 2 %..1/3 of its area and aspect ratio 0.3..3.3 (the first of 10 tries that fits, else
    none) filled with noise N(0, 1) in the recipe's normalised space (ImageNet's mean and std). The boxes
    are drawn from ``generator``, the noise on the device; ``images`` is changed in place and returned."""
    b, c, h, w = images.shape
    apply = torch.rand(b, generator=generator, dtype=torch.float64) <= probability
    area = torch.empty(b, ERASE_TRIES, dtype=torch.float64).uniform_(*ERASE_AREA, generator=generator) * (h * w)
    aspect = torch.empty(b, ERASE_TRIES, dtype=torch.float64).uniform_(
        math.log(ERASE_ASPECT[0]), math.log(ERASE_ASPECT[1]), generator=generator).exp()
    box_h, box_w = (area * aspect).sqrt().round(), (area / aspect).sqrt().round()
    fits = (box_h < h) & (box_w < w)
    first = fits.long().argmax(dim=1, keepdim=True)
    box_h, box_w = box_h.gather(1, first).squeeze(1), box_w.gather(1, first).squeeze(1)
    top = (torch.rand(b, generator=generator, dtype=torch.float64) * (h - box_h + 1)).floor()
    left = (torch.rand(b, generator=generator, dtype=torch.float64) * (w - box_w + 1)).floor()
    rows = (apply & fits.any(dim=1)).nonzero().flatten()
    if len(rows) == 0:
        return images
    index, top, left, box_h, box_w = to_device([rows, top[rows], left[rows], box_h[rows], box_w[rows]], images.device)
    y = torch.arange(h, device=images.device, dtype=top.dtype)[None, :]
    x = torch.arange(w, device=images.device, dtype=top.dtype)[None, :]
    inside_y = (y >= top[:, None]) & (y < (top + box_h)[:, None])
    inside_x = (x >= left[:, None]) & (x < (left + box_w)[:, None])
    mask = (inside_y[:, :, None] & inside_x[:, None, :])[:, None]
    index = index.long()
    chosen = images.index_select(0, index)
    mean, std = erasing_stats(c, images)
    noise = torch.randn(chosen.shape, device=images.device, dtype=images.dtype) * std + mean
    return images.index_copy_(0, index, torch.where(mask, noise, chosen))


def erasing_stats(channels: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The normalisation the recipe's noise is N(0, 1) in: ImageNet's per channel, their averages for other
    channel counts; shaped ``[1, C, 1, 1]`` like ``like``."""
    mean = IMAGENET_MEAN if channels == 3 else (sum(IMAGENET_MEAN) / 3,) * channels
    std = IMAGENET_STD if channels == 3 else (sum(IMAGENET_STD) / 3,) * channels
    shape = (1, channels, 1, 1)
    return like.new_tensor(mean).view(shape), like.new_tensor(std).view(shape)


@dataclass(frozen=True)
class MixParams:
    """One batch's mixing: ``lam`` (the share of each image kept; 1: no mixing), whether by ``cutmix``,
    and the pasted ``box`` (top, bottom, left, right) when so."""

    lam: float
    cutmix: bool
    box: tuple[int, int, int, int] | None = None


def mix_params(height: int, width: int, mixup: float, cutmix: float, prob: float, switch_prob: float,
               generator: torch.Generator | None = None) -> MixParams:
    """timm's ``Mixup._params_per_batch`` and ``cutmix_bbox_and_lam``: with probability ``prob`` the batch
    mixes, by cutmix with probability ``switch_prob`` when both alphas are on; lambda ~ Beta(alpha, alpha)
    (inverse CDF of one uniform draw); cutmix pastes a box of sides sqrt(1 - lambda) of the image's with a
    uniform centre, clipped to the image, and lambda becomes the share not pasted. Five uniform draws
    per batch, whatever is used."""
    from scipy.special import betaincinv

    u = torch.rand(5, generator=generator, dtype=torch.float64).tolist()
    if u[0] >= prob or (mixup <= 0 and cutmix <= 0):
        return MixParams(1.0, False)
    use_cutmix = cutmix > 0 and (mixup <= 0 or u[1] < switch_prob)
    alpha = cutmix if use_cutmix else mixup
    lam = float(betaincinv(alpha, alpha, u[2]))
    if not use_cutmix:
        return MixParams(lam, False)
    ratio = math.sqrt(1.0 - lam)
    cut_h, cut_w = int(height * ratio), int(width * ratio)
    centre_y, centre_x = min(int(u[3] * height), height - 1), min(int(u[4] * width), width - 1)
    top, bottom = max(centre_y - cut_h // 2, 0), min(centre_y + (cut_h + 1) // 2, height)
    left, right = max(centre_x - cut_w // 2, 0), min(centre_x + (cut_w + 1) // 2, width)
    return MixParams(1.0 - (bottom - top) * (right - left) / (height * width), True, (top, bottom, left, right))


def apply_mix(images: torch.Tensor, labels: torch.Tensor, num_classes: int, smoothing: float,
              params: MixParams) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch mixed with itself reversed by ``params``, and its soft targets: one-hot vectors smoothed
    (``smoothing / classes`` off, ``1 - smoothing`` more on) and mixed by lambda (timm's ``mixup_target``)."""
    if params.lam < 1.0 and params.cutmix:
        top, bottom, left, right = params.box
        images = images.clone()
        images[:, :, top:bottom, left:right] = images.flip(0)[:, :, top:bottom, left:right]
    elif params.lam < 1.0:
        images = images * params.lam + images.flip(0) * (1.0 - params.lam)
    off = smoothing / num_classes
    one_hot = torch.full((len(labels), num_classes), off, device=labels.device).scatter_(
        1, labels.long().view(-1, 1), 1.0 - smoothing + off)
    return images, one_hot * params.lam + one_hot.flip(0) * (1.0 - params.lam)

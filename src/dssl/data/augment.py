"""One client's fixed feature shift (paper A's feature non-IID), as batched tensor operations.

Paper A (FedMAR/DecMAR, ICLR 2026) makes feature non-IID clients by applying one fixed augmentation per
client before the SSL view transform. Its released code composes, per image:
``RandomApply([ColorJitter(brightness=b_i)], p=0.8)``, ``RandomApply([GaussianBlur(5, (0.1, 2.0))], p=0.5)``
and ``RandomHorizontalFlip()``, with b_i = 0.5 * u_i drawn once per client. This module applies the
same operations to a whole batch at once, with every random draw taken from a ``torch.Generator``:

- brightness: with probability ``brightness_p`` multiply by a factor ~ U[max(0, 1 - b), 1 + b], clamp to
  [0, 1] (torchvision's ``adjust_brightness``);
- blur: with probability ``blur_p`` a Gaussian blur of odd size ``blur_kernel`` with sigma ~
  U[``blur_sigma``], reflect padding (torchvision's ``gaussian_blur``);
- flip: with probability ``flip_p`` a horizontal flip.

Which images get blurred is a mask; picking them out (``nonzero``) needs their count on the host. On
the CPU only the picked images are blurred; on an accelerator every image is blurred and the mask
chooses (``torch.where``), which costs blur work but no host sync. Each image's blur is a separate
group of the convolution, so a picked image is blurred the same either way (a test checks the two
paths agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch
import torch.nn.functional as F

PARAM_KEYS = ("brightness", "brightness_p", "blur_kernel", "blur_sigma", "blur_p", "flip_p")


@dataclass
class AugmentDraws:
    """Per-sample random choices for one batch (1 = leave unchanged for the factors)."""

    brightness_factor: torch.Tensor  # [B], already 1 where brightness is not applied
    blur_mask: torch.Tensor  # [B] bool
    blur_sigma: torch.Tensor  # [B]
    flip_mask: torch.Tensor  # [B] bool


def gaussian_kernel1d(kernel_size: int, sigma: torch.Tensor) -> torch.Tensor:
    """Normalised 1-D Gaussian kernels ``[len(sigma), kernel_size]`` (each row sums to 1)."""
    half = (kernel_size - 1) / 2
    x = torch.linspace(-half, half, kernel_size, dtype=sigma.dtype, device=sigma.device)
    pdf = torch.exp(-0.5 * (x[None, :] / sigma[:, None]) ** 2)
    return pdf / pdf.sum(dim=1, keepdim=True)


def gaussian_blur(images: torch.Tensor, kernel_size: int, sigma: torch.Tensor) -> torch.Tensor:
    """Blur each image of ``[B, C, H, W]`` with its own sigma: one separable grouped convolution."""
    b, c, h, w = images.shape
    kernels = gaussian_kernel1d(kernel_size, sigma.to(images.dtype)).repeat_interleave(c, dim=0)
    pad = kernel_size // 2
    planes = F.pad(images.reshape(1, b * c, h, w), (pad, pad, pad, pad), mode="reflect")
    planes = F.conv2d(planes, kernels[:, None, None, :], groups=b * c)
    planes = F.conv2d(planes, kernels[:, None, :, None], groups=b * c)
    return planes.reshape(b, c, h, w)


class ClientAugmentation:
    """Apply one client's augmentation (a ``client_augment`` entry of a feature partition)."""

    def __init__(self, params: Mapping[str, Any]):
        missing = sorted(set(PARAM_KEYS) - set(params))
        unknown = sorted(set(params) - set(PARAM_KEYS))
        if missing or unknown:
            raise ValueError(f"client augmentation: missing {missing}, unknown {unknown}; keys: {PARAM_KEYS}")
        self.brightness = float(params["brightness"])
        self.brightness_p = float(params["brightness_p"])
        self.blur_kernel = int(params["blur_kernel"])
        self.blur_sigma = (float(params["blur_sigma"][0]), float(params["blur_sigma"][1]))
        self.blur_p = float(params["blur_p"])
        self.flip_p = float(params["flip_p"])
        if self.blur_kernel < 1 or self.blur_kernel % 2 == 0:
            raise ValueError(f"blur_kernel must be a positive odd number, got {self.blur_kernel}")

    def draw(self, batch_size: int, generator: torch.Generator | None = None) -> AugmentDraws:
        """All random choices for a batch, in a fixed order so a seeded generator repeats them."""
        device = generator.device if generator is not None else torch.device("cpu")

        def uniform() -> torch.Tensor:
            return torch.rand(batch_size, generator=generator, device=device)

        apply_brightness = uniform() < self.brightness_p
        low = max(0.0, 1.0 - self.brightness)
        factor = low + (1.0 + self.brightness - low) * uniform()
        blur_mask = uniform() < self.blur_p
        sigma = self.blur_sigma[0] + (self.blur_sigma[1] - self.blur_sigma[0]) * uniform()
        flip_mask = uniform() < self.flip_p
        factor = torch.where(apply_brightness, factor, torch.ones_like(factor))
        return AugmentDraws(factor, blur_mask, sigma, flip_mask)

    def apply(self, images: torch.Tensor, draws: AugmentDraws, select: bool | None = None) -> torch.Tensor:
        """Brightness, blur, flip (the code's order) on a float batch ``[B, C, H, W]`` in [0, 1].
        ``select``: blur only the chosen images (default on the CPU) or all, then mask (default elsewhere)."""
        device = images.device
        factor = draws.brightness_factor.to(device, images.dtype, non_blocking=True)
        out = (images * factor[:, None, None, None]).clamp(0.0, 1.0)
        blur = draws.blur_mask.to(device, non_blocking=True)
        sigma = draws.blur_sigma.to(device, non_blocking=True)
        if device.type == "cpu" if select is None else select:
            chosen = torch.nonzero(blur).flatten()
            if len(chosen):
                out = out.index_copy(0, chosen, gaussian_blur(out[chosen], self.blur_kernel, sigma[chosen]))
        else:
            out = torch.where(blur[:, None, None, None], gaussian_blur(out, self.blur_kernel, sigma), out)
        flip = draws.flip_mask.to(device, non_blocking=True)[:, None, None, None]
        return torch.where(flip, out.flip(-1), out)

    def __call__(self, images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.apply(images, self.draw(images.shape[0], generator))

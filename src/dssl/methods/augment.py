"""The SSL methods' view transforms: ``ViewTransform`` (paper A's SimSiam [1] / MAE [2] views) and
``FedSSLTransform`` (paper B's [0] one augmentation), built from the batched, seeded image operations of
``dssl.data.views``.

References:
    [0] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [1] SimSiam, 2020, https://arxiv.org/abs/2011.10566
    [2] MAE, 2021, https://arxiv.org/abs/2111.06377
    [3] SimCLR, 2020, https://arxiv.org/abs/2002.05709
"""

from __future__ import annotations

import torch
from torch import nn

from dssl.data.views import blur_kernel_size, color_jitter, gaussian_blur, random_grayscale, random_resized_crop


class ViewTransform(nn.Module):
    """Batched SSL view: random-resized crop + flip, then colour jitter, grayscale and blur.

    Each step is skipped when its probability is 0. ``forward(images, generator=None)`` returns one
    view of the batch; call it twice for two independent views.
    """

    def __init__(
        self,
        image_size: int,
        crop_scale: tuple[float, float] = (0.2, 1.0),
        flip_p: float = 0.5,
        jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1),
        jitter_p: float = 0.0,
        grayscale_p: float = 0.0,
        blur_p: float = 0.0,
        blur_sigma: tuple[float, float] = (0.1, 2.0),
    ) -> None:
        super().__init__()
        self.image_size = image_size
        self.crop_scale = tuple(crop_scale)
        self.flip_p = flip_p
        self.jitter = tuple(jitter)
        self.jitter_p = jitter_p
        self.grayscale_p = grayscale_p
        self.blur_p = blur_p
        self.blur_sigma = tuple(blur_sigma)

    def forward(self, images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        x = random_resized_crop(
            images, self.image_size, self.crop_scale, flip_p=self.flip_p, generator=generator
        )
        if self.jitter_p > 0:
            x = color_jitter(x, *self.jitter, p=self.jitter_p, generator=generator)
        if self.grayscale_p > 0:
            x = random_grayscale(x, self.grayscale_p, generator)
        if self.blur_p > 0:
            x = gaussian_blur(
                x, blur_kernel_size(self.image_size), self.blur_sigma, self.blur_p, generator
            )
        return x

    def extra_repr(self) -> str:
        return (
            f"image_size={self.image_size}, crop_scale={self.crop_scale}, flip_p={self.flip_p}, "
            f"jitter={self.jitter}, jitter_p={self.jitter_p}, grayscale_p={self.grayscale_p}, "
            f"blur_p={self.blur_p}"
        )



class FedSSLTransform(ViewTransform):
    """Paper B's [0] augmentation (FedSSL / EasyFL), shared by its SimCLR, SimSiam, MoCo v2 and BYOL, batched:
    random-resized crop (torchvision's default scale (0.08, 1)), flip (p 0.5), colour jitter
    (0.8, 0.8, 0.8, 0.2) with p 0.8, grayscale p 0.2, no blur. ``jitter_strength`` s scales the jitter
    to (0.8 s, 0.8 s, 0.8 s, 0.2 s), SimCLR's [3] parametrisation; paper B's code gives its MoCo v1 s = 0.5."""

    def __init__(self, image_size: int, crop_min_scale: float = 0.08, flip_p: float = 0.5,
                 jitter_strength: float = 1.0) -> None:
        s = jitter_strength
        super().__init__(
            image_size,
            crop_scale=(crop_min_scale, 1.0),
            flip_p=flip_p,
            jitter=(0.8 * s, 0.8 * s, 0.8 * s, 0.2 * s),
            jitter_p=0.8,
            grayscale_p=0.2,
        )

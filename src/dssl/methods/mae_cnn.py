"""MAE [0] for CNNs, paper A [1] [code]: masked patches are zeroed in pixel space, a CNN encodes the whole
image, a transposed-convolution decoder reconstructs it from the last feature map, and the loss is
the MSE on masked pixels only.

Defaults: mask ratio 0.75; mask patch 16 px at 224 px, scaled with the image side and at least 4 px
(``max(4, image_size * 16 // 224)``: 4 px at 16 or 32 px); decoder width feature_dim / 2
(256 for ResNet-18, 64 for cnn_small), halved at each x2 upsampling, at least 16.

MAE [0] itself is defined on ViTs (mask ratio 0.75 of 16 x 16 patches at 224 px, a transformer decoder); paper
A's CNN variant keeps the ratio and the 16 px patch at 224 px and decodes with transposed convolutions.

References:
    [0] MAE, 2021, https://arxiv.org/abs/2111.06377
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace

import torch
import torch.nn.functional as F
from torch import nn

from dssl.config.methods.mae_cnn import MAECNNConfig
from dssl.methods.base import LossOutput, SSLMethod, require_feature_map
from dssl.methods.mae import MAETransform, random_patch_mask


def default_mask_patch_size(image_size: int) -> int:
    """16 px at 224 px (paper A), proportionally smaller for smaller images, at least 4 px."""
    return max(4, image_size * 16 // 224)


def patch_mask_to_pixels(
    mask: torch.Tensor, patch_size: int, height: int, width: int
) -> torch.Tensor:
    """[B, gh * gw] patch mask (row-major, gh = ceil(H / p)) -> [B, 1, H, W] pixel mask."""
    grid_h, grid_w = math.ceil(height / patch_size), math.ceil(width / patch_size)
    pixels = mask.view(-1, 1, grid_h, grid_w)
    pixels = pixels.repeat_interleave(patch_size, dim=2).repeat_interleave(patch_size, dim=3)
    return pixels[:, :, :height, :width]


class MAECNNDecoder(nn.Sequential):
    """Transposed-conv decoder: ``log2(stride)`` x [ConvTranspose 4x4 stride 2, BN, ReLU], channel
    width ``width`` halved at each step (at least 16), then a 3x3 conv to the image channels."""

    def __init__(self, in_channels: int, out_channels: int, feature_stride: int, width: int) -> None:
        steps = int(math.log2(feature_stride))
        if 2**steps != feature_stride:
            raise ValueError(f"feature stride must be a power of 2, got {feature_stride}")
        layers: list[nn.Module] = []
        channels = in_channels
        for i in range(steps):
            out = max(width >> i, 16)
            layers += [
                nn.ConvTranspose2d(channels, out, kernel_size=4, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(out),
                nn.ReLU(inplace=True),
            ]
            channels = out
        layers.append(nn.Conv2d(channels, out_channels, kernel_size=3, padding=1))
        super().__init__(*layers)

    def forward(self, feature_map: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        """[B, C, h, w] -> [B, out_channels, *size]; resized when size is not h, w times the stride."""
        out = super().forward(feature_map)
        if out.shape[-2:] != size:
            out = F.interpolate(out, size=size, mode="bilinear", align_corners=False)
        return out


class MaskedPixelMSELoss(nn.Module):
    """Mean squared error over masked pixels (all channels) only: MAE's [0] loss, per pixel (paper A's [1] code)."""

    def forward(
        self, pred: torch.Tensor, target: torch.Tensor, pixel_mask: torch.Tensor
    ) -> torch.Tensor:
        """pred, target [B, C, H, W]; pixel_mask [B, 1, H, W] with 1 on masked pixels."""
        squared = ((pred - target) ** 2 * pixel_mask).sum()
        return squared / (pixel_mask.sum() * pred.shape[1]).clamp(min=1)


class MAECNN(SSLMethod):
    """Paper A's [1] MAE [0] for CNN encoders; ``representation`` = pooled encoder features of a masked view.
    Options: :class:`MAECNNConfig`."""

    def __init__(self, encoder: nn.Module, image_size: int, in_chans: int, config: MAECNNConfig) -> None:
        cnn = require_feature_map(encoder, self.name, alternative="mae")
        c = replace(config, mask_patch_size=config.mask_patch_size or default_mask_patch_size(image_size),
                    decoder_width=config.decoder_width or cnn.feature_dim // 2)
        super().__init__(cnn, asdict(c))
        self.mask_ratio = c.mask_ratio
        self.mask_patch_size = c.mask_patch_size
        self.decoder = MAECNNDecoder(cnn.feature_dim, in_chans, cnn.feature_stride, c.decoder_width)
        self.criterion = MaskedPixelMSELoss()
        self.transform = MAETransform(image_size, c.crop_min_scale, c.flip_p)

    def random_pixel_mask(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """[B, 1, H, W]: 1 on the pixels of ``mask_ratio`` of the patches, drawn per sample."""
        b, _, h, w = images.shape
        p = self.mask_patch_size
        num_patches = math.ceil(h / p) * math.ceil(w / p)
        mask = random_patch_mask(b, num_patches, self.mask_ratio, images.device, generator).mask
        return patch_mask_to_pixels(mask, p, h, w).to(images.dtype)

    def compute_loss(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> LossOutput:
        view = self.transform(images, generator)
        pixel_mask = self.random_pixel_mask(view, generator)
        feature_map = self.encoder.forward_features(view * (1 - pixel_mask))
        recon = self.decoder(feature_map, view.shape[-2:])
        loss = self.criterion(recon, view, pixel_mask)
        return LossOutput({"loss": loss}, representation=feature_map.mean(dim=(2, 3)))

    def representation(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Encoder features of a randomly masked (not cropped) view, [B, feature_dim]."""
        return self.encoder(images * (1 - self.random_pixel_mask(images, generator)))

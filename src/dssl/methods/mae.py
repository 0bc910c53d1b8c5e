"""MAE [0] (He et al., CVPR 2022): mask most patches, encode the visible ones, reconstruct the rest.

MAE's own defaults [0]: mask ratio 0.75, a decoder of 8 blocks of width 512 (16 heads) on ViT-B/16, ViT-L/16
and ViT-H/14 [2] encoders, MSE on masked patches, per-patch normalised targets (``norm_pix_loss``) as its better
variant. This code's default differs in the decoder (paper A's [1] 128 x 1) and keeps ``norm_pix_loss`` off.

Defaults: mask ratio 0.75; decoder of dim 128 x 1 block (paper A's Tiny-ViT [code]) for encoders of
dim >= 192, else dim 64 x 1 block (vit_small); decoder heads = dim / 8 (16 at dim 128, MAE's count);
MSE on masked patches, ``norm_pix_loss`` off.

References:
    [0] MAE, 2021, https://arxiv.org/abs/2111.06377
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
    [2] ViT, 2020, https://arxiv.org/abs/2010.11929
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch
from timm.layers import LayerNorm
from timm.models.vision_transformer import Block
from torch import nn

from dssl.config.methods.mae import MAEConfig
from dssl.data.views import rand_uniform
from dssl.methods.augment import ViewTransform
from dssl.methods.base import LossOutput, SSLMethod
from dssl.models.vit import require_vit, sincos_2d_pos_embed


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """[B, C, H, W] -> [B, L, p*p*C], patches in row-major order, pixels (row, col, channel)."""
    b, c, h, w = images.shape
    p = patch_size
    x = images.reshape(b, c, h // p, p, w // p, p)
    return torch.einsum("bchpwq->bhwpqc", x).reshape(b, (h // p) * (w // p), p * p * c)


def unpatchify(patches: torch.Tensor, patch_size: int, channels: int) -> torch.Tensor:
    """Inverse of :func:`patchify` for a square grid: [B, L, p*p*C] -> [B, C, H, W]."""
    b, num_patches, _ = patches.shape
    p, grid = patch_size, math.isqrt(num_patches)
    x = patches.reshape(b, grid, grid, p, p, channels)
    return torch.einsum("bhwpqc->bchpwq", x).reshape(b, channels, grid * p, grid * p)


@dataclass
class PatchMask:
    """A per-sample random patch mask (MAE's ``random_masking``).

    ``ids_keep`` [B, n_keep]: visible patches in shuffled order; ``ids_restore`` [B, L]: the inverse
    shuffle; ``mask`` [B, L]: 1.0 where a patch is masked, 0.0 where visible.
    """

    ids_keep: torch.Tensor
    ids_restore: torch.Tensor
    mask: torch.Tensor


def random_patch_mask(
    batch_size: int,
    num_patches: int,
    mask_ratio: float,
    device: torch.device,
    generator: torch.Generator | None = None,
) -> PatchMask:
    """Mask ``num_patches - int(num_patches * (1 - mask_ratio))`` patches per sample, chosen by an
    argsort of uniform noise, so each sample gets its own patches and the same count."""
    n_keep = int(num_patches * (1 - mask_ratio))
    noise = rand_uniform((batch_size, num_patches), 0.0, 1.0, device, generator)
    ids_shuffle = noise.argsort(dim=1)
    ids_restore = ids_shuffle.argsort(dim=1)
    mask = torch.ones(batch_size, num_patches, device=device)
    mask[:, :n_keep] = 0
    return PatchMask(ids_shuffle[:, :n_keep], ids_restore, mask.gather(1, ids_restore))


def gather_tokens(tokens: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """tokens [B, L, D], ids [B, n] -> [B, n, D]."""
    return tokens.gather(1, ids.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]))


def _init_mae_weights(module: nn.Module) -> None:
    """MAE's initialisation: xavier-uniform Linear weights, zero biases."""
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


class MAEDecoder(nn.Module):
    """MAE's light decoder: embed the visible tokens, insert mask tokens, unshuffle, add fixed
    sin-cos positions, transformer blocks, LayerNorm, linear prediction of each patch's pixels.

    Paper A's [1] Tiny-ViT [code]: decoder_dim 128, depth 1 (its text says 5 blocks), this code's default; MAE's
    own [0]: 512 x 8 blocks, 16 heads.
    """

    def __init__(
        self,
        grid_size: int,
        encoder_dim: int,
        patch_dim: int,
        decoder_dim: int = 128,
        depth: int = 1,
        num_heads: int = 16,
        mlp_ratio: float = 4.0,
    ) -> None:
        super().__init__()
        self.embed = nn.Linear(encoder_dim, decoder_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_dim))
        self.pos_embed = nn.Parameter(
            sincos_2d_pos_embed(decoder_dim, grid_size, cls_token=True), requires_grad=False
        )
        self.blocks = nn.Sequential(
            *[Block(decoder_dim, num_heads, mlp_ratio, qkv_bias=True) for _ in range(depth)]
        )
        self.norm = LayerNorm(decoder_dim)
        self.pred = nn.Linear(decoder_dim, patch_dim)
        self.apply(_init_mae_weights)
        nn.init.normal_(self.mask_token, std=0.02)

    def forward(self, latent: torch.Tensor, ids_restore: torch.Tensor) -> torch.Tensor:
        """latent [B, 1 + n_keep, D_enc] (class token first) -> pixel predictions [B, L, patch_dim]."""
        x = self.embed(latent)
        b, num_patches = ids_restore.shape
        mask_tokens = self.mask_token.expand(b, num_patches + 1 - x.shape[1], -1)
        patches = gather_tokens(torch.cat([x[:, 1:], mask_tokens], dim=1), ids_restore)
        x = torch.cat([x[:, :1], patches], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.pred(x[:, 1:])


class MAELoss(nn.Module):
    """Mean squared error per patch, averaged over masked patches only (MAE [0], Sec. 3).

    ``norm_pix_loss``: targets normalised by each patch's mean and variance (MAE's better variant;
    off by default here as in paper A).
    """

    def __init__(self, norm_pix_loss: bool = False) -> None:
        super().__init__()
        self.norm_pix_loss = norm_pix_loss

    def forward(self, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """pred, target [B, L, P]; mask [B, L] with 1 on masked patches."""
        if self.norm_pix_loss:
            mean = target.mean(dim=-1, keepdim=True)
            var = target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1e-6).sqrt()
        per_patch = ((pred - target) ** 2).mean(dim=-1)
        return (per_patch * mask).sum() / mask.sum().clamp(min=1)


class MAETransform(ViewTransform):
    """MAE's pretraining augmentation, batched: random-resized crop scale (0.2, 1) and flip (p 0.5)."""

    def __init__(self, image_size: int, crop_min_scale: float = 0.2, flip_p: float = 0.5) -> None:
        super().__init__(image_size, crop_scale=(crop_min_scale, 1.0), flip_p=flip_p)


class MAE(SSLMethod):
    """MAE [0] on a ViT [2] backbone; ``representation`` = mean of the encoded visible tokens of a masked
    view (paper A's [1] z for MAR: one embedding per image). Sizes and defaults: see the module and
    :class:`MAEConfig`."""

    def __init__(self, encoder: nn.Module, image_size: int, in_chans: int, config: MAEConfig) -> None:
        vit = require_vit(encoder, self.name, alternative="mae_cnn")
        decoder_dim = config.decoder_dim or (128 if vit.embed_dim >= 192 else 64)
        c = replace(config, decoder_dim=decoder_dim, decoder_heads=config.decoder_heads or decoder_dim // 8)
        super().__init__(vit, asdict(c))
        self.mask_ratio = c.mask_ratio
        patch_dim = vit.patch_size**2 * in_chans
        self.decoder = MAEDecoder(
            vit.grid_size, vit.embed_dim, patch_dim, c.decoder_dim, c.decoder_depth, c.decoder_heads
        )
        self.criterion = MAELoss(c.norm_pix_loss)
        self.transform = MAETransform(image_size, c.crop_min_scale, c.flip_p)

    def random_mask(self, images: torch.Tensor, generator: torch.Generator | None = None) -> PatchMask:
        """A fresh per-sample patch mask at ``mask_ratio`` for this batch."""
        return random_patch_mask(
            images.shape[0], self.encoder.num_patches, self.mask_ratio, images.device, generator
        )

    def encode_visible(self, images: torch.Tensor, mask: PatchMask) -> torch.Tensor:
        """Encoder on the class token + visible patches only: [B, 1 + n_keep, D] after the final norm."""
        vit = self.encoder
        tokens = vit.patch_embed(images) + vit.pos_embed[:, 1:]
        visible = gather_tokens(tokens, mask.ids_keep)
        cls = (vit.cls_token + vit.pos_embed[:, :1]).expand(images.shape[0], -1, -1)
        return vit.norm(vit.blocks(torch.cat([cls, visible], dim=1)))

    def compute_loss(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> LossOutput:
        view = self.transform(images, generator)
        mask = self.random_mask(view, generator)
        latent = self.encode_visible(view, mask)
        pred = self.decoder(latent, mask.ids_restore)
        loss = self.criterion(pred, patchify(view, self.encoder.patch_size), mask.mask)
        return LossOutput({"loss": loss}, representation=latent[:, 1:].mean(dim=1), tokens=latent)

    def representation(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Mean-pooled encoded visible tokens of a randomly masked (not cropped) view, [B, D]."""
        latent = self.encode_visible(images, self.random_mask(images, generator))
        return latent[:, 1:].mean(dim=1)

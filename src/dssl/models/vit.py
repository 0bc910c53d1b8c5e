"""Vision Transformer backbone: a thin subclass of timm's ``VisionTransformer``.

It keeps timm's modules and attribute names (``patch_embed``, ``pos_embed``, ``cls_token``, ``blocks``,
``norm``) so that MAE can run the encoder on a subset of patch tokens, and adds ``feature_dim``,
``patch_size``, ``grid_size`` and ``num_patches``.

ViT [0] (Dosovitskiy et al., ICLR 2021): ViT-B/16 has width 768, depth 12, 12 heads, MLP 3072 (86 M parameters),
a class token and learned 1-D position embeddings; here the position embeddings are MAE's [1] fixed 2-D sin-cos
ones. Paper A's [2] Tiny-ViT (``tiny_vit``) is a plain ViT at 224 px, patch 14, width 320, depth 9, 16 heads.

References:
    [0] ViT, 2020, https://arxiv.org/abs/2010.11929
    [1] MAE, 2021, https://arxiv.org/abs/2111.06377
    [2] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

import torch
from timm.models.vision_transformer import VisionTransformer


def sincos_1d(embed_dim: int, positions: torch.Tensor) -> torch.Tensor:
    """[N] positions -> [N, embed_dim] sin/cos features (Vaswani et al., 2017), MAE's layout."""
    omega = 1.0 / 10000 ** (torch.arange(embed_dim // 2, dtype=torch.float64) / (embed_dim / 2))
    angles = positions.to(torch.float64)[:, None] * omega[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def sincos_2d_pos_embed(embed_dim: int, grid_size: int, cls_token: bool = True) -> torch.Tensor:
    """Fixed 2-D sin-cos position embedding of MAE [1] (He et al., 2022): [1, (1 +) grid^2, embed_dim].

    Half of the channels encode the row, half the column; the class token (if any) gets zeros.
    """
    if embed_dim % 4:
        raise ValueError(f"sin-cos position embedding needs embed_dim divisible by 4, got {embed_dim}")
    coords = torch.arange(grid_size)
    rows = coords.repeat_interleave(grid_size)
    cols = coords.repeat(grid_size)
    emb = torch.cat([sincos_1d(embed_dim // 2, rows), sincos_1d(embed_dim // 2, cols)], dim=1)
    if cls_token:
        emb = torch.cat([torch.zeros(1, embed_dim, dtype=emb.dtype), emb], dim=0)
    return emb.float().unsqueeze(0)


# Which features ``forward`` returns (timm's ``global_pool`` names): the final-norm class token, or the
# mean of the final-norm patch tokens (MAE fine-tunes on the latter; MAE's class token is barely trained
# by its reconstruction loss).
POOLS = ("token", "avg")


class ViTBackbone(VisionTransformer):
    """ViT [0] (Dosovitskiy et al., 2021) with a class token and fixed 2-D sin-cos position embeddings (ViT's
    own are learned).

    ``forward(x)`` returns the final-norm class token, [B, embed_dim] (MAE's linear-probe feature and
    MoCo v3's), or after ``set_pool("avg")`` the mean of the final-norm patch tokens. Position embeddings
    are fixed, as in MAE and MoCo v3, so they are not trainable parameters; qkv has a bias and LayerNorm
    eps is 1e-6 (timm's and MAE's ViT defaults).
    """

    def __init__(
        self,
        image_size: int,
        in_chans: int,
        patch_size: int,
        embed_dim: int,
        depth: int,
        num_heads: int,
        mlp_ratio: float = 4.0,
    ) -> None:
        if image_size % patch_size:
            raise ValueError(
                f"image size {image_size} is not a multiple of the ViT patch size {patch_size}; "
                "resize the images or pass another patch_size"
            )
        super().__init__(
            img_size=image_size,
            patch_size=patch_size,
            in_chans=in_chans,
            num_classes=0,
            global_pool="token",
            embed_dim=embed_dim,
            depth=depth,
            num_heads=num_heads,
            mlp_ratio=mlp_ratio,
            qkv_bias=True,
        )
        grid = image_size // patch_size
        with torch.no_grad():
            self.pos_embed.copy_(sincos_2d_pos_embed(embed_dim, grid, cls_token=True))
        self.pos_embed.requires_grad_(False)

    def set_pool(self, pool: str) -> None:
        """``forward`` returns the class token (``token``) or the mean of the patch tokens (``avg``)."""
        if pool not in POOLS:
            raise ValueError(f"unknown ViT pool {pool!r}; known: {', '.join(POOLS)}")
        self.reset_classifier(0, global_pool=pool)

    @property
    def feature_dim(self) -> int:
        return self.embed_dim

    @property
    def patch_size(self) -> int:
        return self.patch_embed.patch_size[0]

    @property
    def grid_size(self) -> int:
        return self.patch_embed.grid_size[0]

    @property
    def num_patches(self) -> int:
        return self.patch_embed.num_patches


def require_vit(encoder: torch.nn.Module, method: str, alternative: str) -> ViTBackbone:
    """The encoder as a ViT, or a ValueError naming the method to use instead."""
    if not isinstance(encoder, ViTBackbone):
        raise ValueError(
            f"method {method!r} needs a ViT backbone (tiny_vit, vit_small); "
            f"got {type(encoder).__name__}; use {alternative!r} for CNNs"
        )
    return encoder


# Builders by params.yaml name, each declared with its options and family in ``dssl.config.backbones.<name>``.


def tiny_vit(image_size: int, in_chans: int, patch_size: int) -> ViTBackbone:
    """Paper A's [2] Tiny-ViT: width 320, depth 9, 16 heads."""
    return ViTBackbone(image_size, in_chans, patch_size, embed_dim=320, depth=9, num_heads=16)


def vit_small(image_size: int, in_chans: int, patch_size: int | None, depth: int, num_heads: int) -> ViTBackbone:
    """The small CPU ViT: width 96; no ``patch_size`` keeps a 4 x 4 grid of tokens (patch = image side / 4)."""
    patch_size = patch_size or max(1, image_size // 4)
    return ViTBackbone(image_size, in_chans, patch_size, embed_dim=96, depth=depth, num_heads=num_heads)

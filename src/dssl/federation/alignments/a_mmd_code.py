"""``a_mmd_code``: paper A's [0] released code's A-MMD over [B, T, D] token tensors, a kernel per feature
dimension (its definition: its spec ``dssl.config.alignments.a_mmd_code``, declared ``tokens=True``).

References:
    [0] FedMAR / DecMAR, 2026, https://github.com/xuanyuLawrence/FedMAR-DecMAR
"""

from __future__ import annotations

import torch

from dssl.federation.alignment import BANDWIDTH_FLOOR


def a_mmd_code(z: torch.Tensor, z_bar: torch.Tensor) -> torch.Tensor:
    """Paper A's released code: token tensors [B, T, D], a kernel per feature dimension (see module)."""
    if z.ndim != 3 or z_bar.ndim != 3 or z.shape[1:] != z_bar.shape[1:]:
        raise ValueError(f"a_mmd_code needs two [B, T, D] token tensors of one layout, got "
                         f"{tuple(z.shape)} and {tuple(z_bar.shape)}")
    b, m = z.shape[0], z_bar.shape[0]
    if b < 2 or m < 2:
        raise ValueError(f"a_mmd_code needs at least 2 samples on each side, got {b} and {m}")
    z_bar = z_bar.detach()
    with torch.no_grad():  # the code's mean_pairwise_distance: torch.cdist per image, diagonal included
        sigma = torch.cdist(z, z).mean().clamp_min(BANDWIDTH_FLOOR)
    scale = 2.0 * sigma**2

    def kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # [Bx, By, D]
        sq = x.pow(2).sum(dim=1)[:, None, :] + y.pow(2).sum(dim=1)[None, :, :] - 2 * torch.einsum("atd,btd->abd", x, y)
        return torch.exp(-sq.clamp_min(0) / scale)

    return (kernel(z, z).sum() / (b * (b - 1)) + kernel(z_bar, z_bar).sum() / (m * (m - 1))
            - 2.0 * kernel(z, z_bar).mean())


def a_mmd_code_term(z: torch.Tensor, z_bar: torch.Tensor, sigma: float) -> torch.Tensor:
    """Entry ``a_mmd_code`` (its bandwidth is the tokens' own: the fixed ``sigma`` is not used)."""
    return a_mmd_code(z, z_bar)

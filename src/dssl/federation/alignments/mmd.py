"""MMD alignments: paper A's [0] A-MMD (Eq. 6) with the mean-distance bandwidth (``a_mmd``, the default), the
median heuristic (``a_mmd_median``) and a fixed bandwidth (``mmd``, Table 7's "vanilla MMD (sigma = 1)").
Unbiased MMD^2 [1] with a Gaussian kernel; their definitions are their specs'
(``dssl.config.alignments.a_mmd``, ``.a_mmd_median``, ``.mmd``).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Eq. 6, Table 7)
    [1] Gretton, Borgwardt, Rasch, Schoelkopf & Smola, "A Kernel Two-Sample Test", JMLR 13 (2012) 723-773
"""

from __future__ import annotations

import torch

from dssl.federation.alignment import BANDWIDTH_FLOOR


def squared_distances(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """[B, D] x [M, D] -> [B, M] squared Euclidean distances (no square root: smooth at 0)."""
    cross = x @ y.T
    return (x.pow(2).sum(dim=1)[:, None] + y.pow(2).sum(dim=1)[None, :] - 2 * cross).clamp_min(0)


@torch.no_grad()
def bandwidth(z: torch.Tensor, statistic: str = "mean") -> torch.Tensor:
    """sigma = mean (or median) over a != b of ||z_a - z_b|| (paper A's adaptive bandwidth), a 0-d tensor
    on z's device, at least ``BANDWIDTH_FLOOR``."""
    if statistic not in ("mean", "median"):
        raise ValueError(f"bandwidth statistic must be 'mean' or 'median', got {statistic!r}")
    n = z.shape[0]
    if n < 2:
        raise ValueError(f"the bandwidth needs at least 2 embeddings, got {n}")
    off_diagonal = ~torch.eye(n, dtype=torch.bool, device=z.device)
    distances = squared_distances(z, z)[off_diagonal].sqrt()
    value = distances.mean() if statistic == "mean" else distances.median()
    return value.clamp_min(BANDWIDTH_FLOOR)


def mmd(z: torch.Tensor, z_bar: torch.Tensor, sigma: float | torch.Tensor) -> torch.Tensor:
    """Unbiased MMD^2 with a Gaussian kernel of bandwidth ``sigma`` (Gretton et al. [1]; paper A [0], Eq. 6)."""
    b, m = z.shape[0], z_bar.shape[0]
    if b < 2 or m < 2:
        raise ValueError(f"MMD needs at least 2 embeddings on each side, got {b} and {m}")
    scale = 2.0 * sigma**2

    def within(x: torch.Tensor) -> torch.Tensor:
        kernel = torch.exp(-squared_distances(x, x) / scale)
        return (kernel.sum() - kernel.diagonal().sum()) / (len(x) * (len(x) - 1))

    cross = torch.exp(-squared_distances(z, z_bar) / scale).mean()
    return within(z) + within(z_bar) - 2.0 * cross


def a_mmd(z: torch.Tensor, z_bar: torch.Tensor, statistic: str = "mean") -> torch.Tensor:
    """Paper A's A-MMD(z_i, z_bar): MMD^2 with the bandwidth of the local batch; z_bar is constant."""
    return mmd(z, z_bar.detach(), bandwidth(z, statistic))


def a_mmd_mean(z: torch.Tensor, z_bar: torch.Tensor, sigma: float) -> torch.Tensor:
    """Entry ``a_mmd``: the mean-distance bandwidth of the local batch (the fixed ``sigma`` is not used)."""
    return a_mmd(z, z_bar, "mean")


def a_mmd_median(z: torch.Tensor, z_bar: torch.Tensor, sigma: float) -> torch.Tensor:
    """Entry ``a_mmd_median``: the median-distance bandwidth of the local batch (the fixed ``sigma`` is not used)."""
    return a_mmd(z, z_bar, "median")


def fixed_mmd(z: torch.Tensor, z_bar: torch.Tensor, sigma: float) -> torch.Tensor:
    """Entry ``mmd``: the strategy's fixed bandwidth ``sigma``."""
    return mmd(z, z_bar.detach(), sigma)

"""Local-to-global alignment of representations: paper A's [0] A-MMD (Eq. 6), the alternatives of its
Table 7 ablation, and the cosine schedule of the alignment weight (Eq. 7).

Registry ``ALIGNMENTS`` (names as in params.yaml, ``fedmar`` / ``decmar`` option ``alignment``):

- ``a_mmd``: paper A's A-MMD, the default. Unbiased MMD^2 [1] between a local batch z [B, D] and a
  global one z_bar [M, D] (diagonals excluded in the within-sample sums; B = M in the paper) with
  the Gaussian kernel k(z, z') = exp(-||z - z'||^2 / (2 sigma^2)) and the data-driven bandwidth
  sigma = mean_{a != b} ||z_a - z_b|| over the local batch. The kernel printed beside Eq. 6 drops the
  square on the distance; the Gaussian kernel the paper states just before it squares it, so the
  printed one is read as a typo.
- ``a_mmd_median``: the same with the median pairwise distance (Table 7, "A-MMD (median sigma)"), Gretton et
  al.'s [1] median heuristic, which they take over the pooled two samples and this code over the local batch.
- ``mmd``: a fixed bandwidth ``sigma`` (Table 7, "vanilla MMD (sigma = 1)").
- ``cosine``: 1 - mean_a cos(z_a, mean_b z_bar_b), each local embedding against the global mean
  direction (Table 7, "cosine similarity"; the paper gives no formula, this pairing is ours: the rows
  of z and z_bar are different images, so a row-by-row cosine would pair them at random).
- ``a_mmd_code``: paper A's released code. z and z_bar are [B, T, D] token tensors (class token and
  the visible patch tokens in shuffled order); the kernel is taken per feature dimension d over the
  tokens, k_d(a, b) = exp(-sum_t (z[a,t,d] - z_bar[b,t,d])^2 / (2 sigma^2)); sigma is the mean token
  distance within each image (zeros of the diagonal included); the within-sample sums keep their
  diagonals but are divided by B(B-1); the cross term is a mean over (a, b, d), so it is scaled by
  1/D relative to them.

In every variant sigma is computed without gradient and z_bar is a constant: the gradient reaches
the model through z alone (paper A, Eq. 5: only z_i = f_e(x_1) depends on the local weights). The
data-driven sigma stays a 0-d tensor on the batch's device (no host round trip per step); the kernel
takes it or a fixed float alike, with the same bits.

Paper A's [0] defaults (``fedmar`` / ``decmar``): ``a_mmd`` with the mean-distance bandwidth, gamma from 0.1 down
to 1e-3 by Eq. 7; ``mmd``'s sigma 1 is Table 7's. All are this code's defaults.

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Eq. 5-7, Tables 7 and 8)
    [1] Gretton, Borgwardt, Rasch, Schoelkopf & Smola, "A Kernel Two-Sample Test", JMLR 13 (2012) 723-773
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

BANDWIDTH_FLOOR = 1e-12  # a batch of identical embeddings has sigma 0; the kernel is then 1 off-diagonal


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


def cosine_alignment(z: torch.Tensor, z_bar: torch.Tensor) -> torch.Tensor:
    """1 - mean_a cos(z_a, mean(z_bar)): 0 when every local embedding points along the global mean."""
    direction = z_bar.detach().mean(dim=0, keepdim=True)
    return 1.0 - F.cosine_similarity(z, direction.expand_as(z), dim=1).mean()


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


def _fixed_mmd(z: torch.Tensor, z_bar: torch.Tensor, sigma: float) -> torch.Tensor:
    return mmd(z, z_bar.detach(), sigma)


# name -> (function of (z, z_bar, sigma), whether it takes token tensors)
ALIGNMENTS: dict[str, tuple[Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor], bool]] = {
    "a_mmd": (lambda z, z_bar, sigma: a_mmd(z, z_bar, "mean"), False),
    "a_mmd_median": (lambda z, z_bar, sigma: a_mmd(z, z_bar, "median"), False),
    "mmd": (_fixed_mmd, False),
    "cosine": (lambda z, z_bar, sigma: cosine_alignment(z, z_bar), False),
    "a_mmd_code": (lambda z, z_bar, sigma: a_mmd_code(z, z_bar), True),
}


def alignment_loss(name: str, z: torch.Tensor, z_bar: torch.Tensor, sigma: float = 1.0) -> torch.Tensor:
    """The alignment term ``name`` between local z and global z_bar, in float32 even inside a bf16
    autocast region (exp of squared distances loses too much in bf16)."""
    if name not in ALIGNMENTS:
        raise KeyError(f"unknown alignment {name!r}; known: {', '.join(ALIGNMENTS)}")
    with torch.autocast(device_type=z.device.type, enabled=False):
        return ALIGNMENTS[name][0](z.float(), z_bar.float(), sigma)


def cosine_gamma(omega: float, horizon: float, gamma_max: float, gamma_min: float) -> float:
    """Paper A, Eq. 7: gamma_min + (gamma_max - gamma_min) (1 + cos(pi omega / Omega)) / 2.

    ``omega``: times the client was selected before; ``horizon`` (Omega): the decay horizon. Past the
    horizon gamma stays at gamma_min (the released code saturates the progress at 1; the printed
    cosine would rise again). gamma_max == gamma_min is a constant weight (Table 8's fixed rows).
    """
    progress = 1.0 if horizon <= 0 else min(max(omega / horizon, 0.0), 1.0)
    return gamma_min + (gamma_max - gamma_min) * 0.5 * (1.0 + math.cos(math.pi * progress))

"""Local-to-global alignment of representations: paper A's [0] A-MMD (Eq. 6), the alternatives of its
Table 7 ablation, and the cosine schedule of the alignment weight (Eq. 7).

Registry ``ALIGNMENTS`` (names as in params.yaml, ``fedmar`` / ``decmar`` option ``alignment``), each entry in
a module of ``dssl.federation.alignments`` (``mmd``: the three MMD terms; ``cosine``; ``a_mmd_code``) declared
``@register_alignment("<name>")`` and imported when used, so a MAR cell depends on its own term's code:

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

from dssl.registry import Registry

BANDWIDTH_FLOOR = 1e-12  # a batch of identical embeddings has sigma 0; the kernel is then 1 off-diagonal

AlignmentTerm = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]   # (z, z_bar, sigma) -> loss
ALIGNMENTS: Registry[AlignmentTerm] = Registry.lazy("alignment")


def register_alignment(name: str, tokens: bool = False) -> Callable[[AlignmentTerm], AlignmentTerm]:
    """Decorator: an alignment term ``(z, z_bar, sigma) -> loss`` under ``name``. ``tokens`` (a literal, read
    from the source by ``uses_tokens``): the term takes [B, T, D] token tensors instead of [B, D] embeddings."""
    def register(term: AlignmentTerm) -> AlignmentTerm:
        term.tokens = tokens
        return ALIGNMENTS.register(name)(term)

    return register


def uses_tokens(name: str) -> bool:
    """Whether alignment ``name`` takes token tensors, from its declaration (nothing is imported); an unknown
    name raises ``UnknownNameError``."""
    return bool(ALIGNMENTS.options(name).get("tokens", False))


def alignment_loss(name: str, z: torch.Tensor, z_bar: torch.Tensor, sigma: float = 1.0) -> torch.Tensor:
    """The alignment term ``name`` between local z and global z_bar, in float32 even inside a bf16
    autocast region (exp of squared distances loses too much in bf16). An unknown name raises
    ``UnknownNameError`` (a ``KeyError``) naming the known ones."""
    term = ALIGNMENTS[name]
    with torch.autocast(device_type=z.device.type, enabled=False):
        return term(z.float(), z_bar.float(), sigma)


def cosine_gamma(omega: float, horizon: float, gamma_max: float, gamma_min: float) -> float:
    """Paper A, Eq. 7: gamma_min + (gamma_max - gamma_min) (1 + cos(pi omega / Omega)) / 2.

    ``omega``: times the client was selected before; ``horizon`` (Omega): the decay horizon. Past the
    horizon gamma stays at gamma_min (the released code saturates the progress at 1; the printed
    cosine would rise again). gamma_max == gamma_min is a constant weight (Table 8's fixed rows).
    """
    progress = 1.0 if horizon <= 0 else min(max(omega / horizon, 0.0), 1.0)
    return gamma_min + (gamma_max - gamma_min) * 0.5 * (1.0 + math.cos(math.pi * progress))

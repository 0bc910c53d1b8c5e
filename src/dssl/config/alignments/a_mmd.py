"""``a_mmd``: paper A's [0] A-MMD (Eq. 6), the default alignment. The unbiased MMD^2 of Gretton et al. [1]
between a local batch z [B, D] and a global one z_bar [M, D] (diagonals excluded in the within-sample sums; B = M
in the paper) with the Gaussian kernel k(z, z') = exp(-||z - z'||^2 / (2 sigma^2)) and the data-driven bandwidth
sigma = mean_{a != b} ||z_a - z_b|| over the local batch. The kernel printed beside Eq. 6 drops the square on the
distance; the Gaussian kernel the paper states just before it squares it, so the printed one is read as a typo.
Paper A's defaults (gamma from 0.1 down to 1e-3 by Eq. 7, this bandwidth) are this code's.

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Eq. 6, Table 7)
    [1] Gretton, Borgwardt, Rasch, Schoelkopf & Smola, "A Kernel Two-Sample Test", JMLR 13 (2012) 723-773,
        https://jmlr.org/papers/v13/gretton12a.html
"""

from __future__ import annotations

from dssl.config.alignments import AlignmentSpec
from dssl.specs import NoOptions

SPEC = AlignmentSpec("a_mmd", NoOptions, "federation.alignments.mmd:a_mmd_mean")

"""``a_mmd_code``: the A-MMD of paper A's [0] released code, over token tensors (MAE on a ViT only). z and z_bar
are [B, T, D] (class token and the visible patch tokens in shuffled order); the kernel is taken per feature
dimension d over the tokens, k_d(a, b) = exp(-sum_t (z[a,t,d] - z_bar[b,t,d])^2 / (2 sigma^2)); sigma is the mean
token distance within each image (zeros of the diagonal included); the within-sample sums keep their diagonals but
are divided by B(B-1); the cross term is a mean over (a, b, d), so it is scaled by 1/D relative to them (compare
``a_mmd``, Eq. 6, and Gretton et al.'s [1] unbiased MMD^2).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Eq. 6); code:
        https://github.com/xuanyuLawrence/FedMAR-DecMAR
    [1] Gretton, Borgwardt, Rasch, Schoelkopf & Smola, "A Kernel Two-Sample Test", JMLR 13 (2012) 723-773,
        https://jmlr.org/papers/v13/gretton12a.html
"""

from __future__ import annotations

from dssl.config.alignments import AlignmentSpec
from dssl.specs import NoOptions

SPEC = AlignmentSpec("a_mmd_code", NoOptions, "federation.alignments.a_mmd_code:a_mmd_code_term", tokens=True)

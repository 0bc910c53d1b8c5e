"""``a_mmd_median``: ``a_mmd`` with the median pairwise distance as its bandwidth (paper A's [0] Table 7,
"A-MMD (median sigma)"): Gretton et al.'s [1] median heuristic, which they take over the pooled two samples and
this code over the local batch.

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Eq. 6, Table 7)
    [1] Gretton, Borgwardt, Rasch, Schoelkopf & Smola, "A Kernel Two-Sample Test", JMLR 13 (2012) 723-773,
        https://jmlr.org/papers/v13/gretton12a.html
"""

from __future__ import annotations

from dssl.config.alignments import AlignmentSpec
from dssl.specs import NoOptions

SPEC = AlignmentSpec("a_mmd_median", NoOptions, "federation.alignments.mmd:a_mmd_median")

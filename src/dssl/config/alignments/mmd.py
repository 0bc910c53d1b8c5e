"""``mmd``: the unbiased MMD^2 of Gretton et al. [1] with a Gaussian kernel of the fixed bandwidth given by the
strategy's ``sigma`` option (paper A's [0] Table 7, "vanilla MMD (sigma = 1)"; 1.0 is the default).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Eq. 6, Table 7)
    [1] Gretton, Borgwardt, Rasch, Schoelkopf & Smola, "A Kernel Two-Sample Test", JMLR 13 (2012) 723-773,
        https://jmlr.org/papers/v13/gretton12a.html
"""

from __future__ import annotations

from dssl.config.alignments import AlignmentSpec
from dssl.specs import NoOptions

SPEC = AlignmentSpec("mmd", NoOptions, "federation.alignments.mmd:fixed_mmd")

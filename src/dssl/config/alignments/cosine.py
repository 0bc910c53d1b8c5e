"""``cosine``: 1 - mean_a cos(z_a, mean_b z_bar_b), each local embedding against the global mean direction (paper
A's [0] Table 7, "cosine similarity"). The paper gives no formula; this pairing is ours: the rows of z and z_bar
are different images, so a row-by-row cosine would pair them at random.

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Table 7)
"""

from __future__ import annotations

from dssl.config.alignments import AlignmentSpec
from dssl.specs import NoOptions

SPEC = AlignmentSpec("cosine", NoOptions, "federation.alignments.cosine:cosine")

"""``degree_normalised``: w_ij proportional to 1/|A_j| over the closed neighbourhood of i (rows normalised): a
neighbour with many neighbours of its own weighs less (paper A's [0] Table 6 compares the mixing rules).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Table 6)
"""

from __future__ import annotations

from dssl.config.mixing import MixingSpec
from dssl.specs import NoOptions

SPEC = MixingSpec("degree_normalised", NoOptions, "topology.mixing_rules.degree_normalised:degree_normalised")

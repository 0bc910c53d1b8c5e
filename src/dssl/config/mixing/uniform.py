"""``uniform``: w_ij = 1/|A_i| for every j in the closed neighbourhood A_i of client i (i itself included), paper
A's [0] Algorithm 2 and the default rule. It is also the reference every rule's distance is measured from
(``topology.mixing.distance_to_uniform``, paper A's Table 6).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Algorithm 2, Table 6)
"""

from __future__ import annotations

from dssl.config.mixing import MixingSpec
from dssl.specs import NoOptions

SPEC = MixingSpec("uniform", NoOptions, "topology.mixing_rules.uniform:uniform")

"""``data_size``: client i weights each j of its closed neighbourhood by j's number of samples (rows normalised),
as paper A's [0] released code mixes (Table 6 compares it with Algorithm 2's ``uniform``). It needs the clients'
sample counts.

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Table 6); code:
        https://github.com/xuanyuLawrence/FedMAR-DecMAR
"""

from __future__ import annotations

from dssl.config.mixing import MixingSpec
from dssl.specs import NoOptions

SPEC = MixingSpec("data_size", NoOptions, "topology.mixing_rules.data_size:data_size")

"""``metropolis_hastings``: w_ij = 1 / (1 + max(d_i, d_j)) for every neighbour j, the rest on the diagonal: Xiao,
Boyd & Lall's Metropolis weights [1], from the degrees of a node and its neighbours alone. Symmetric and doubly
stochastic on any undirected graph, so plain averaging converges to the exact mean (paper A's [0] Table 6 compares
the mixing rules).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Table 6)
    [1] Xiao, Boyd & Lall, "A Scheme for Robust Distributed Sensor Fusion Based on Average Consensus", IPSN 2005
"""

from __future__ import annotations

from dssl.config.mixing import MixingSpec
from dssl.specs import NoOptions

SPEC = MixingSpec("metropolis_hastings", NoOptions, "topology.mixing_rules.metropolis_hastings:metropolis_hastings")

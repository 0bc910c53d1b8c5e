"""``push_sum``: p_ij = 1 / |out_j| for every i in j's closed out-neighbourhood (j splits its mass equally among
itself and the clients it sends to). Column-stochastic, not row-stochastic: it is run with push-sum weights
(Kempe et al. [1]; for optimisation Nedic & Olshevsky [2] and Assran et al.'s Stochastic Gradient Push [3]), which
correct the bias of directed or unbalanced graphs. It also takes a directed graph, reading ``adjacency[j, i]`` as
"j sends to i".

References:
    [1] Kempe, Dobra & Gehrke, "Gossip-Based Computation of Aggregate Information", FOCS 2003
    [2] Nedic & Olshevsky, "Distributed Optimization over Time-Varying Directed Graphs", IEEE TAC 2015
    [3] Assran, Loizou, Ballas & Rabbat, "Stochastic Gradient Push for Distributed Deep Learning", ICML 2019,
        https://arxiv.org/abs/1811.10792
"""

from __future__ import annotations

from dssl.config.mixing import MixingSpec
from dssl.specs import NoOptions

SPEC = MixingSpec("push_sum", NoOptions, "topology.mixing_rules.push_sum:push_sum", column_stochastic=True)

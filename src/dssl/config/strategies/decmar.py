"""DecMAR's options (``strategies.<entry>`` of ``name: decmar``), declared once.

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
    [1] D-PSGD, 2017, https://arxiv.org/abs/1705.09056
"""

from __future__ import annotations

from dataclasses import dataclass

from dssl.config.strategies import StrategySpec
from dssl.config.strategies._mar import MARConfig


@dataclass(frozen=True)
class DecMARConfig(MARConfig):
    """Paper A's [0] Algorithm 2: D-PSGD [1] on the MAR loss, each client's z_bar the neighbour mean of the z
    sent (with the round's mixing matrix). Paper A's defaults (gamma 0.1 -> 1e-3 by Eq. 7's cosine, A-MMD) are
    this code's; DecL only."""


SPEC = StrategySpec("decmar", DecMARConfig, "federation.strategies.mar:DecMAR", ("decl",))

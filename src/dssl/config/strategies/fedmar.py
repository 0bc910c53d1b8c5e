"""FedMAR's options (``strategies.<entry>`` of ``name: fedmar``), declared once.

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
"""

from __future__ import annotations

from dataclasses import dataclass

from dssl.config.strategies import StrategySpec
from dssl.config.strategies._mar import MARConfig


@dataclass(frozen=True)
class FedMARConfig(MARConfig):
    """Paper A's [0] Algorithm 1: FedAvg on the MAR loss, the server averaging z like the weights. Paper A's
    defaults (gamma 0.1 -> 1e-3 by Eq. 7's cosine, A-MMD, MAE at mask ratio 0.75 on its Tiny-ViT) are this
    code's; FL only."""


SPEC = StrategySpec("fedmar", FedMARConfig, "federation.strategies.mar:FedMAR", ("fl",))

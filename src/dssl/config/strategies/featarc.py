"""FeatARC's options (``strategies.<entry>`` of ``name: featarc``), declared once.

References:
    [0] Dec-SSL / FeatARC, 2022, https://arxiv.org/abs/2210.10947
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Table 2, where it is a baseline)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from dssl.config.ranges import Range
from dssl.config.strategies import StrategySpec
from dssl.config.strategies._base import AggregationConfig


@dataclass(frozen=True)
class FeatARCConfig(AggregationConfig):
    """Dec-SSL's [0] feature alignment and clustering, paper A's [1] "FeatARC" baseline: ``num_clusters`` cluster
    models (M = 2, the released code's), each client joining the one of best feature agreement and training SimCLR
    plus ``align_weight`` (1.0, the code's ``reg_scale``) times the alignment to its frozen features;
    ``init_seed`` enters the seeds that initialise clusters j > 0; ``aggregation`` weights clients within a
    cluster. Both defaults are the released code's. FL only.
    """

    num_clusters: Annotated[int, Range(1, 100)] = 2
    align_weight: Annotated[float, Range(0.0)] = 1.0
    init_seed: Annotated[int, Range(0, 4_294_967_295)] = 0


SPEC = StrategySpec("featarc", FeatARCConfig, "federation.strategies.featarc:FeatARC", ("fl",))

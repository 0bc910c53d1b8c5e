"""L-DAWA's options (``strategies.<entry>`` of ``name: ldawa``), declared once.

References:
    [0] L-DAWA, 2023, https://arxiv.org/abs/2307.07393
    [1] FedAvg, 2016, https://arxiv.org/abs/1602.05629
    [2] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Table 2, where it is a baseline)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from dssl.config.ranges import Range
from dssl.config.strategies import StrategySpec
from dssl.config.strategies._base import StrategyConfig


@dataclass(frozen=True)
class LDAWAConfig(StrategyConfig):
    """L-DAWA [0]: the server scales each client layer by its cosine with the previous global layer.

    ``granularity``: ``layer`` (default, the paper's per-layer cosine capped at 1) or ``model`` (one cosine over
    the whole model, the variant paper A [2] likely ran). ``warmup_rounds``: rounds of plain FedAvg [1] first; 0
    by default, where the released code aggregates its first 3 rounds by FedAvg. L-DAWA averages the scaled
    layers with 1/K (``aggregation: uniform``, this code's default). FL only.
    """

    granularity: Literal["layer", "model"] = "layer"
    warmup_rounds: Annotated[int, Range(0, 100_000)] = 0


SPEC = StrategySpec("ldawa", LDAWAConfig, "federation.strategies.ldawa:LDAWA", ("fl",))

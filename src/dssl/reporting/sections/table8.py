"""Paper A's Table 8: the gamma schedule of the MAR loss, as a comparison table."""

from __future__ import annotations

from dssl.reporting.sections.base import register_section
from dssl.reporting.sections.strategy_comparison import StrategyComparison


@register_section("table8")
class Table8(StrategyComparison):
    """Paper A Table 8: constant gamma against the cosine schedule of MAR's weight."""

    title = "Table 8: gamma schedule of the MAR loss"
    paper_key = "table8_gamma_schedule"
    best_row = "cosine_0.1_to_0.001"
    claim = "the cosine gamma schedule beats every constant gamma (paper A, Table 8)"
    intro = ("Paper A's Table 8 compares constant weights gamma of the A-MMD term with its cosine schedule "
             "(gamma 0 = MAE).")

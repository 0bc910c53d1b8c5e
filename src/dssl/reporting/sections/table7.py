"""Paper A's Table 7: the alignment metric of the MAR loss, as a comparison table."""

from __future__ import annotations

from dssl.reporting.sections.base import register_section
from dssl.reporting.sections.strategy_comparison import StrategyComparison


@register_section("table7")
class Table7(StrategyComparison):
    """Paper A Table 7: the alignment metric of MAR's regulariser."""

    title = "Table 7: alignment metric of the MAR loss"
    paper_key = "table7_alignment_metric"
    best_row = "ammd_mean_sigma"
    claim = "A-MMD with the mean-distance bandwidth is the best alignment metric (paper A, Table 7)"
    intro = "Paper A's Table 7 replaces A-MMD by other alignment metrics at two values of gamma."

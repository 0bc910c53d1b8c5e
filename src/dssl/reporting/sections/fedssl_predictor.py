"""Paper B's predictor ablation, as a comparison table."""

from __future__ import annotations

from dssl.reporting.sections.base import register_section
from dssl.reporting.sections.strategy_comparison import StrategyComparison


@register_section("fedssl_predictor")
class FedSSLPredictor(StrategyComparison):
    """Paper B's ablation: the predictor is necessary (without it FedSimSiam and FedBYOL collapse)."""

    title = "Paper B ablation: the predictor"
    best_row = "with predictor"
    claim = "the predictor is necessary: with it accuracy is higher (paper B)"
    intro = "Paper B finds that without a predictor FedSimSiam and FedBYOL collapse."

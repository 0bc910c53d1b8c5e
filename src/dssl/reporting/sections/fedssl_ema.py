"""Paper B's EMA-target ablation, as a comparison table."""

from __future__ import annotations

from dssl.reporting.sections.base import register_section
from dssl.reporting.sections.strategy_comparison import StrategyComparison


@register_section("fedssl_ema")
class FedSSLEma(StrategyComparison):
    """Paper B's ablation: an EMA target network helps."""

    note = ("Without EMA the target is the online network itself (`ema_target: false`, BYOL's tau = 0); "
            "paper B's code freezes the target instead (`momentum: 1.0` with the strategy's "
            "`first_round_target: online`).")
    title = "Paper B ablation: the EMA target"
    best_row = "with EMA"
    claim = "an EMA target network helps (paper B)"
    intro = "Paper B finds that an EMA target improves the generalised methods."

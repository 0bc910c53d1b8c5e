"""Paper B's generalised FedSSL methods (FedSimCLR, FedMoCo, FedBYOL, FedSimSiam), as a comparison
table."""

from __future__ import annotations

from dssl.reporting.sections.base import register_section
from dssl.reporting.sections.strategy_comparison import StrategyComparison


@register_section("fedssl_methods")
class FedSSLMethods(StrategyComparison):
    """Paper B's generalised methods: FedSimCLR, FedMoCo, FedBYOL, FedSimSiam under IID and non-IID data."""

    note = ("MoCo's defaults are its own papers' definition (one loss direction, v2's head without BN, key "
            "encoder and queue kept per client across rounds); paper B's code is `symmetric`, `head_bn`, "
            "`reset_key_encoder`, `reset_queue` and, for v1, `jitter_strength: 0.5` with a constant learning rate: "
            "a row runs what its model entry lists above.")
    title = "Paper B: generalised FedSSL methods"
    best_row = "FedBYOL"
    claim = "FedBYOL is the best of the generalised FedSSL methods (paper B)"
    intro = ("Paper B generalises four SSL methods to FL (upload and average the online network) and finds FedBYOL "
             "the best and FedSimSiam the worst; its cells were not recoverable, so only the ordering is checked.")

"""FedSSL's options (``strategies.<entry>`` of ``name: fedssl``): paper B's design space, declared once.

References:
    [0] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [1] FedU, 2021, https://arxiv.org/abs/2108.06492
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from dssl.config.ranges import Range
from dssl.config.strategies import StrategySpec
from dssl.config.strategies._base import AggregationConfig


@dataclass(frozen=True)
class FedSSLConfig(AggregationConfig):
    """Paper B's [0] FedSSL framework; names as in its code (EasyFL ``applications/fedssl``).

    ``aggregate_encoder``: which encoder (encoder + projector) is uploaded and averaged, ``online`` (default),
    ``target`` (the EMA target, sent in the online network's place) or ``both``. ``update_encoder``: which local
    networks the global encoder replaces, ``online`` (default), ``target``, ``both``, ``none``, or ``ema`` (the
    online network becomes ``encoder_ema * local + (1 - encoder_ema) * global``; ``encoder_ema`` in [0, 1] is
    required with it and refused without it). ``update_predictor``: ``global`` (default) or ``local`` (the client
    keeps its own; FedU [1] chooses by a divergence). ``first_round_target``: ``copy`` (default; a client's first
    target is a copy of the online network it receives) or ``online`` (paper B's code: in the first round the
    target is the online network itself).

    Paper B's setting (its code's defaults): 5 clients all training every round, 100 rounds, 5 local epochs,
    batch 128, SGD lr 0.032, BYOL's target EMA 0.99, clients weighted by data size; the defaults (online / online /
    global) are FedAvg of the online network and predictor with the target kept on the client, as paper B's
    FedBYOL. This code's default ``aggregation: uniform`` differs (``data_size`` is paper B's).
    """

    aggregate_encoder: Literal["online", "target", "both"] = "online"
    update_encoder: Literal["online", "target", "both", "none", "ema"] = "online"
    update_predictor: Literal["global", "local"] = "global"
    encoder_ema: Annotated[float | None, Range(0.0, 1.0)] = None
    first_round_target: Literal["copy", "online"] = "copy"


SPEC = StrategySpec("fedssl", FedSSLConfig, "federation.strategies.fedssl:FedSSL")

"""The option FedU and FedEMA share: which divergence between the global and the client's model they read.

References:
    [0] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
    [1] FedU, 2021, https://arxiv.org/abs/2108.06492
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dssl.config.strategies._base import AggregationConfig


@dataclass(frozen=True)
class DivergenceConfig(AggregationConfig):
    """A divergence-aware FedSSL strategy (FedU [1], FedEMA [0]); its FedSSL design choices are fixed by the
    strategy, so they are not options.

    ``divergence``: ``paper`` (default) = paper B's ||W_g^r - W_k^(r-1)|| in the norm its constants were tuned on
    (its code's mean of per-kernel L2 norms over the encoder's convolutions); ``paper_flat`` = the same difference
    as one flattened L2 norm of the online network; ``code`` = the released code's drift of the client's encoder
    during its previous local training.
    """

    divergence: Literal["paper", "paper_flat", "code"] = "paper"

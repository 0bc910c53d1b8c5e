"""``uniform``: 1/|A_i| over the closed neighbourhood, paper A's Algorithm 2 (the default rule).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Algorithm 2)
"""

from __future__ import annotations

import numpy as np

from dssl.topology.mixing import register_mixing, uniform_weights


@register_mixing("uniform")
def uniform(adjacency: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    """Paper A's weights; the computation is shared with the distance every rule is measured by."""
    return uniform_weights(adjacency)

"""``cosine``: 1 - mean_a cos(z_a, mean_b z_bar_b), each local embedding against the global mean direction
(paper A's [0] Table 7, "cosine similarity"; the pairing is ours, see its spec ``dssl.config.alignments.cosine``).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Table 7)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cosine_alignment(z: torch.Tensor, z_bar: torch.Tensor) -> torch.Tensor:
    """1 - mean_a cos(z_a, mean(z_bar)): 0 when every local embedding points along the global mean."""
    direction = z_bar.detach().mean(dim=0, keepdim=True)
    return 1.0 - F.cosine_similarity(z, direction.expand_as(z), dim=1).mean()


def cosine(z: torch.Tensor, z_bar: torch.Tensor, sigma: float) -> torch.Tensor:
    """Entry ``cosine`` (no bandwidth: ``sigma`` is not used)."""
    return cosine_alignment(z, z_bar)

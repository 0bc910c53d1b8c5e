"""Local-to-global alignment of representations: paper A's [0] A-MMD (Eq. 6), the alternatives of its
Table 7 ablation, and the cosine schedule of the alignment weight (Eq. 7).

The terms are declared once, one torch-free spec each, in ``dssl.config.alignments`` (registry
``ALIGNMENT_SPECS``, names as in params.yaml, ``fedmar`` / ``decmar`` option ``alignment``; each spec module
documents its term and cites its reference: ``a_mmd`` the default, Eq. 6 with the unbiased MMD^2 of Gretton et al.
[1]; ``a_mmd_median``, ``mmd`` and ``cosine`` of Table 7; ``a_mmd_code`` the released code's token layout), and
implemented in the modules of ``dssl.federation.alignments`` (``mmd``: the three MMD terms; ``cosine``;
``a_mmd_code``), imported when used, so a MAR cell depends on its own term's code.

In every term sigma is computed without gradient and z_bar is a constant: the gradient reaches
the model through z alone (paper A, Eq. 5: only z_i = f_e(x_1) depends on the local weights). The
data-driven sigma stays a 0-d tensor on the batch's device (no host round trip per step); the kernel
takes it or a fixed float alike, with the same bits.

Paper A's [0] defaults (``fedmar`` / ``decmar``): ``a_mmd`` with the mean-distance bandwidth, gamma from 0.1 down
to 1e-3 by Eq. 7; ``mmd``'s sigma 1 is Table 7's. All are this code's defaults.

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Eq. 5-7, Tables 7 and 8)
    [1] Gretton, Borgwardt, Rasch, Schoelkopf & Smola, "A Kernel Two-Sample Test", JMLR 13 (2012) 723-773
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable

import torch

from dssl.config.alignments import ALIGNMENT_SPECS

BANDWIDTH_FLOOR = 1e-12  # a batch of identical embeddings has sigma 0; the kernel is then 1 off-diagonal

AlignmentTerm = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]   # (z, z_bar, sigma) -> loss


def uses_tokens(name: str) -> bool:
    """Whether alignment ``name`` takes token tensors, from its spec (its code is not imported); an unknown
    name raises ``UnknownNameError``."""
    return ALIGNMENT_SPECS[name].tokens


@lru_cache(maxsize=None)
def _term(name: str) -> AlignmentTerm:
    """The function of alignment ``name``, imported once: ``alignment_loss`` runs every training step."""
    return ALIGNMENT_SPECS[name].load()


def alignment_loss(name: str, z: torch.Tensor, z_bar: torch.Tensor, sigma: float = 1.0) -> torch.Tensor:
    """The alignment term ``name`` between local z and global z_bar, in float32 even inside a bf16
    autocast region (exp of squared distances loses too much in bf16). An unknown name raises
    ``UnknownNameError`` (a ``KeyError``) naming the known ones."""
    term = _term(name)
    with torch.autocast(device_type=z.device.type, enabled=False):
        return term(z.float(), z_bar.float(), sigma)


def cosine_gamma(omega: float, horizon: float, gamma_max: float, gamma_min: float) -> float:
    """Paper A, Eq. 7: gamma_min + (gamma_max - gamma_min) (1 + cos(pi omega / Omega)) / 2.

    ``omega``: times the client was selected before; ``horizon`` (Omega): the decay horizon. Past the
    horizon gamma stays at gamma_min (the released code saturates the progress at 1; the printed
    cosine would rise again). gamma_max == gamma_min is a constant weight (Table 8's fixed rows).
    """
    progress = 1.0 if horizon <= 0 else min(max(omega / horizon, 0.0), 1.0)
    return gamma_min + (gamma_max - gamma_min) * 0.5 * (1.0 + math.cos(math.pi * progress))

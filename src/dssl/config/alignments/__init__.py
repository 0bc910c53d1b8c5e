"""The local-to-global alignment terms of FedMAR / DecMAR, declared once (registry ``ALIGNMENT_SPECS``): one
torch-free module per term, named after it.

Paper A's [0] MAR loss adds gamma_t * A(z, z_bar) to a client's method loss (Eq. 5-7); ``A`` is the ``alignment``
option of ``fedmar`` / ``decmar``: ``a_mmd`` (Eq. 6, the default) or an alternative of its Table 7 ablation. Module
``<name>.py`` sets ``SPEC = AlignmentSpec("<name>", NoOptions, "federation.alignments.<module>:<function>")``, its
docstring the term and its reference; the function maps ``(z, z_bar, sigma)`` to the loss (``sigma``: the strategy's
fixed bandwidth, read by ``mmd`` alone). One implementing module may hold several terms (``a_mmd``,
``a_mmd_median`` and ``mmd`` are in ``federation.alignments.mmd``). No term has a size of its own to set.
``tokens``: the term takes [B, T, D] token tensors (MAE's, on a ViT) instead of [B, D] embeddings.

In every term sigma is computed without gradient and z_bar is a constant: the gradient reaches the model through z
alone (paper A, Eq. 5: only z_i = f_e(x_1) depends on the local weights). A MAR cell's code lineage holds its own
term's spec and implementing modules only (``dssl.registry.SpecRegistry``).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Eq. 5-7, Table 7)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dssl.registry import SpecRegistry
from dssl.specs import EntrySpec

__all__ = ["AlignmentSpec", "ALIGNMENT_SPECS"]


@dataclass(frozen=True)
class AlignmentSpec(EntrySpec):
    """An alignment term: its name, its (empty) config, its function ``(z, z_bar, sigma) -> loss``, and whether
    it takes [B, T, D] token tensors rather than [B, D] embeddings."""

    kind: ClassVar[str] = "alignment"

    tokens: bool = False


ALIGNMENT_SPECS: SpecRegistry[AlignmentSpec] = SpecRegistry.of("alignment")

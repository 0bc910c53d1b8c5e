"""The mixing (consensus) rules of decentralized averaging, declared once (registry ``MIXING_SPECS``): one
torch-free module per rule, named after it.

A DecL round averages client i's model as sum_j W_ij x_j with the matrix of the entry's ``mixing`` rule (paper A's
[0] Table 6 compares them). Module ``<name>.py`` sets ``SPEC = MixingSpec("<name>", NoOptions,
"topology.mixing_rules.<name>:<function>")``, its docstring the rule and its reference; the function maps
``(adjacency, sizes)`` to the matrix. No rule has a size to set, so a rule's params entry is its name alone. Every
matrix is row-stochastic but those of the rules declared ``column_stochastic`` (``push_sum``), which are run with
push-sum weights. The graphs of this project are undirected (symmetric adjacency). The default rule is paper A's
``uniform`` (Algorithm 2; its released code mixes by ``data_size``). A DecL cell's code lineage holds its own
rule's spec and implementing modules only (``dssl.registry.SpecRegistry``).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ (Algorithm 2, Table 6)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dssl.registry import SpecRegistry
from dssl.specs import EntrySpec

__all__ = ["MixingSpec", "MIXING_SPECS"]


@dataclass(frozen=True)
class MixingSpec(EntrySpec):
    """A mixing rule: its name, its (empty) config, its function ``(adjacency, sizes) -> matrix``, and whether
    that matrix is column-stochastic rather than row-stochastic (then it is run with push-sum weights)."""

    kind: ClassVar[str] = "mixing rule"

    column_stochastic: bool = False


MIXING_SPECS: SpecRegistry[MixingSpec] = SpecRegistry.of("mixing")

"""The federation strategies, declared once (registry ``STRATEGY_SPECS``): one torch-free module per strategy,
named after it.

Module ``<name>.py`` sets ``SPEC = StrategySpec("<name>", <Name>Config, "federation.strategies.<module>:<Class>",
frameworks)``. The config dataclass (a :class:`dssl.specs.Options`) holds the strategy's options, the keys a
``strategies.<entry>`` may set beside the entry's own (``name``, ``train``, ``mixing``, ``order``): each with its
type, default and, for a number, its valid range; its docstring cites the strategy's paper and the paper's defaults.
A strategy extends its base's config as its class extends its base class (the shared ones are the ``_*`` modules).
``frameworks`` says where it runs (FedMAR in FL only, DecMAR in DecL only). What depends on several options
together is checked when the strategy is built, before training. A stage's code lineage holds its own strategy's
spec and implementing modules only (``dssl.registry.SpecRegistry``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dssl.registry import SpecRegistry
from dssl.specs import EntrySpec

__all__ = ["StrategySpec", "STRATEGY_SPECS", "FRAMEWORKS"]

FRAMEWORKS = ("fl", "decl")


@dataclass(frozen=True)
class StrategySpec(EntrySpec):
    """A federation strategy: its name, its options' config dataclass, its :class:`Strategy` subclass, and the
    frameworks it runs in."""

    kind: ClassVar[str] = "strategy"

    frameworks: tuple[str, ...] = FRAMEWORKS


STRATEGY_SPECS: SpecRegistry[StrategySpec] = SpecRegistry.of("strategy")

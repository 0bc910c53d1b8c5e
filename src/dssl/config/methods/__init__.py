"""The SSL methods, declared once (registry ``METHOD_SPECS``): one torch-free module per method, named after it.

Module ``<name>.py`` sets ``SPEC = MethodSpec("<name>", <Name>Config, "methods.<module>:<Class>")``. The config
dataclass (a :class:`dssl.specs.Options`) holds the method's hyper-parameters, the keys of a ``models.<model>.hparams``
entry: each with its type, its default (``None``: derived from the backbone when the method is built) and, for a
number, its valid range; its docstring cites the method's paper and the paper's defaults. The params validator
reads every check from it; the method's class takes it (``create_method`` builds it from the params), and keeps
the resolved values as its ``hparams``. A new method is its spec module here plus its module in ``dssl.methods``:
a stage's code lineage holds its own method's two modules only (``dssl.registry.SpecRegistry``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dssl.registry import SpecRegistry
from dssl.specs import EntrySpec

__all__ = ["MethodSpec", "METHOD_SPECS"]


@dataclass(frozen=True)
class MethodSpec(EntrySpec):
    """An SSL method: its name, its hyper-parameters' config dataclass, and its :class:`SSLMethod` subclass."""

    kind: ClassVar[str] = "method"


METHOD_SPECS: SpecRegistry[MethodSpec] = SpecRegistry.of("method")

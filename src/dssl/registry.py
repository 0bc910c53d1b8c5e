"""Name -> object registries whose keys are the strings used in ``params.yaml`` (torch-free).

Two kinds, one vocabulary (timm's ``_registry.py`` is the model: the name in ``params.yaml``, in a stage's name,
in MLflow's params and in the report's rows is the registry key):
- :class:`Registry`, a ``dict`` whose failed lookups name the known entries: for entries built where they are
  listed (datasets, partition schemes, topologies, report sections);
- :class:`SpecRegistry`, for the entries a stage runs (methods, strategies, backbones, evaluation protocols,
  mixing rules, alignment terms): each declared once, as a torch-free spec in a module of its own
  (``SPEC_PACKAGES``), the code it names imported only when used, so a stage depends on its own cell's entries.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Callable, Generic, NoReturn, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """An unregistered name; the message lists the registered ones.

    Subclasses both ``KeyError`` (a failed registry lookup) and ``ValueError`` (a bad configuration
    value), so callers may catch either.
    """

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message and show it quoted.
        return str(self.args[0])


class Registry(dict[str, T], Generic[T]):
    """A ``dict`` from name to entry whose failed lookups raise :class:`UnknownNameError` listing the names."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator that stores its argument under ``name`` (each name once)."""

        def add(entry: T) -> T:
            if dict.__contains__(self, name):
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self[name] = entry
            return entry

        return add

    def names(self) -> list[str]:
        """Every name, sorted; imports nothing."""
        return sorted(dict.keys(self))

    def __missing__(self, name: str) -> T:
        self._unknown(name)

    def _unknown(self, name: str) -> NoReturn:
        raise UnknownNameError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")


# The registries whose entries are torch-free specs: kind -> its spec package, relative to ``dssl`` (a full module
# name in a string counts as an import for the code lineage, ``dssl.pipeline.codedeps``, and this module is imported
# by every stage). Each package's ``__init__`` holds the spec class and the registry (``SpecRegistry.of(kind)``).
SPEC_PACKAGES: dict[str, str] = {
    "method": "config.methods",
    "strategy": "config.strategies",
    "backbone": "config.backbones",
    "protocol": "config.protocols",
    "mixing": "config.mixing",
    "alignment": "config.alignments",
}


class SpecRegistry(Registry[T]):
    """Entries declared one torch-free module each in ``package`` (relative to ``dssl``): module ``<name>.py``
    sets ``SPEC``, whose ``name`` is the module's stem (``dssl.specs.EntrySpec``); modules whose stem starts
    with ``_`` hold what several specs share. The names are the modules' stems, so listing them, ``len`` and
    ``in`` import nothing; a lookup imports that one spec module (standard library only), never the code it
    names; iterating loads every spec, in name order. A stage's code lineage holds an entry's spec module and
    its implementing module (``modules_of``), not its siblings'."""

    def __init__(self, kind: str, package: str) -> None:
        super().__init__(kind)
        self.package = package

    @classmethod
    def of(cls, kind: str) -> SpecRegistry:
        """The registry of ``kind`` (a key of ``SPEC_PACKAGES``), one instance per kind."""
        return _spec_registry(cls, kind)

    def declared(self) -> dict[str, str]:
        """Every name -> its spec module, in name order."""
        return {stem: module_name(self.package, stem) for stem in spec_stems(self.package)}

    def names(self) -> list[str]:
        return list(self.declared())

    def module_of(self, name: str) -> str:
        """The spec module of ``name``; an unknown name raises UnknownNameError."""
        declared = self.declared()
        if name not in declared:
            self._unknown(name)
        return declared[name]

    def modules_of(self, name: str) -> list[str]:
        """The spec module of ``name`` and the module implementing it."""
        return [self.module_of(name), self[name].module]

    def __missing__(self, name: str) -> T:
        module = self.module_of(name)
        spec = getattr(importlib.import_module(module), "SPEC", None)
        if spec is None or getattr(spec, "name", None) != name:
            raise ValueError(f"{module} must set SPEC, a spec named {name!r} after its module")
        dict.__setitem__(self, name, spec)
        return spec

    def __contains__(self, name: object) -> bool:
        return name in self.declared()

    def __len__(self) -> int:
        return len(self.declared())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def keys(self):  # type: ignore[override]
        return self.names()

    def values(self):  # type: ignore[override]
        return [self[name] for name in self.names()]

    def items(self):  # type: ignore[override]
        return [(name, self[name]) for name in self.names()]


@lru_cache(maxsize=None)
def _spec_registry(cls: type, kind: str) -> SpecRegistry:
    if kind not in SPEC_PACKAGES:
        raise UnknownNameError(f"unknown registry {kind!r}; known: {', '.join(sorted(SPEC_PACKAGES))}")
    return cls(kind, SPEC_PACKAGES[kind])


@lru_cache(maxsize=None)
def spec_stems(package: str) -> tuple[str, ...]:
    """The entry modules of a spec package (relative to ``dssl``): its ``*.py`` but ``__init__`` and ``_*``."""
    folder = Path(__file__).resolve().parent.joinpath(*package.split("."))
    return tuple(sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")))


def module_name(package: str, stem: str) -> str:
    """The importable name of module ``stem`` of a package given relative to ``dssl``."""
    return ".".join([__package__ or "dssl", package, stem])


def import_cpu(module: str) -> None:
    """Import ``module`` with the CPU as torch's default device: a lookup may happen inside a
    ``torch.device("meta")`` or ``("cuda")`` block (the plan counts FLOPs on the meta device), and a
    module's import-time tensors must not land there."""
    torch = sys.modules.get("torch")
    if torch is None:
        importlib.import_module(module)
        return
    with torch.device("cpu"):
        importlib.import_module(module)

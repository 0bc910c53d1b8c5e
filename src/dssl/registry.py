"""Name -> object registries whose keys are the strings used in ``params.yaml`` (torch-free)."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Generic, NoReturn, TypeVar

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
    """A ``dict`` from name to entry whose failed lookups raise :class:`UnknownNameError`.

    With ``package`` and ``decorator`` it is lazy: the entries are declared by decorators in the modules
    of that package (``@register_backbone("cnn_small", family="cnn")``, ``@register_protocol("knn")``,
    ``@register_mixing("uniform")``, ``@register_alignment("a_mmd")``, ...), which are found by
    reading the modules' syntax trees (``declared_names``) and imported only when a name is looked up.
    A stage that evaluates on kNN then imports, and depends on, kNN's module alone: that is what lets
    a stage's code lineage (``dssl.pipeline.codedeps``) hold only the modules its cell uses. A declaration's
    literal keyword options (a backbone's ``family``, a mixing rule's ``column_stochastic``, a protocol's
    config class) are read from the same syntax trees (``entry_options``), so they too are declared once,
    beside the code, and known without importing it. Iterating,
    ``len`` and ``in`` see every declared name (iteration imports them all).
    """

    def __init__(self, kind: str, package: str | None = None, decorator: str | None = None) -> None:
        super().__init__()
        self.kind = kind
        self.package = package
        self.decorator = decorator

    @classmethod
    def lazy(cls, kind: str) -> Registry:
        """The lazy registry of ``kind`` (a key of ``LAZY``)."""
        package, decorator = LAZY[kind]
        return cls(kind, package, decorator)

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator that stores its argument under ``name`` (each name once)."""

        def add(entry: T) -> T:
            if dict.__contains__(self, name):
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self[name] = entry
            return entry

        return add

    def declared(self) -> dict[str, str]:
        """Every declared name -> the module declaring it (empty for an eager registry)."""
        if self.package is None or self.decorator is None:
            return {}
        return {name: module_name(self.package, stem)
                for name, stem in declared_names(self.package, self.decorator).items()}

    def module_of(self, name: str) -> str:
        """The module that implements ``name`` (its code lineage); an unknown name raises UnknownNameError."""
        declared = self.declared()
        if name not in declared:
            self._unknown(name)
        return declared[name]

    def options(self, name: str) -> dict[str, object]:
        """The literal keyword options ``name`` is declared with (``entry_options``), read without importing
        its module; an unknown name raises UnknownNameError."""
        found = declarations(self.package, self.decorator) if self.package and self.decorator else {}
        if name not in found:
            self._unknown(name)
        return dict(found[name][1])

    def names(self) -> list[str]:
        """Every name, declared or registered, sorted; imports nothing."""
        return sorted(set(self.declared()) | set(dict.keys(self)))

    def load_all(self) -> Registry[T]:
        """Import every declaring module (for listings and tests), and return the registry."""
        for module in sorted(set(self.declared().values())):
            import_cpu(module)
        return self

    def __missing__(self, name: str) -> T:
        module = self.declared().get(name)
        if module is not None:
            import_cpu(module)
            if dict.__contains__(self, name):
                return dict.__getitem__(self, name)
        self._unknown(name)

    def _unknown(self, name: str) -> NoReturn:
        raise UnknownNameError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self.declared()

    def __iter__(self) -> Iterator[str]:
        return iter(dict.keys(self.load_all()))

    def __len__(self) -> int:
        return len(self.names())

    def keys(self):  # type: ignore[override]
        return dict.keys(self.load_all())

    def values(self):  # type: ignore[override]
        return dict.values(self.load_all())

    def items(self):  # type: ignore[override]
        return dict.items(self.load_all())


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


class SpecRegistry(Registry[T]):
    """Entries declared one torch-free module each in ``package`` (relative to ``dssl``): module ``<name>.py``
    sets ``SPEC``, whose ``name`` is the module's stem (``dssl.specs.EntrySpec``); modules whose stem starts
    with ``_`` hold what several specs share. The names are the modules' stems, so listing them imports
    nothing; a lookup imports that one spec module (standard library only), never the code it names. A stage's
    code lineage holds an entry's spec module and its implementing module (``modules_of``), not its siblings'."""

    def __init__(self, kind: str, package: str) -> None:
        super().__init__(kind)
        self.spec_package = package

    def declared(self) -> dict[str, str]:
        return {stem: module_name(self.spec_package, stem) for stem in spec_stems(self.spec_package)}

    def modules_of(self, name: str) -> list[str]:
        """The spec module of ``name`` and the module implementing it."""
        return [self.module_of(name), self[name].module]

    def load_all(self) -> SpecRegistry[T]:
        for name in self.declared():
            self[name]
        return self

    def __missing__(self, name: str) -> T:
        module = self.declared().get(name)
        if module is None:
            self._unknown(name)
        spec = getattr(importlib.import_module(module), "SPEC", None)
        if spec is None or getattr(spec, "name", None) != name:
            raise ValueError(f"{module} must set SPEC, a spec named {name!r} after its module")
        dict.__setitem__(self, name, spec)
        return spec


@lru_cache(maxsize=None)
def spec_stems(package: str) -> tuple[str, ...]:
    """The entry modules of a spec package (relative to ``dssl``): its ``*.py`` but ``__init__`` and ``_*``."""
    folder = Path(__file__).resolve().parent.joinpath(*package.split("."))
    return tuple(sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")))


# The lazy registries: kind -> (package inside ``dssl``, the decorator that declares an entry). A package is
# written relative to ``dssl``: a full module name in a string counts as an import for the code lineage
# (``dssl.pipeline.codedeps``), and this module is imported by every stage.
LAZY: dict[str, tuple[str, str]] = {
    "backbone": ("models", "register_backbone"),
    "protocol": ("evaluation", "register_protocol"),
    "mixing": ("topology.mixing_rules", "register_mixing"),
    "alignment": ("federation.alignments", "register_alignment"),
}


def module_name(package: str, stem: str) -> str:
    """The importable name of module ``stem`` of a package given relative to ``dssl``."""
    return ".".join([__package__ or "dssl", package, stem])


def component_module(kind: str, name: str) -> str:
    """The module implementing entry ``name`` of lazy registry ``kind``, found without importing anything."""
    package, decorator = LAZY[kind]
    declared = declared_names(package, decorator)
    if name not in declared:
        raise UnknownNameError(f"unknown {kind} {name!r}; known: {', '.join(sorted(declared))}")
    return module_name(package, declared[name])


def declared_names(package: str, decorator: str) -> dict[str, str]:
    """``{name: module stem}`` for every declaration in the modules of ``package`` (``declarations``)."""
    return {name: stem for name, (stem, _) in declarations(package, decorator).items()}


def entry_options(kind: str) -> dict[str, dict[str, object]]:
    """``{name: {keyword: value}}``: the literal keyword arguments each entry of lazy registry ``kind`` is
    declared with (a backbone's ``family``), read without importing anything."""
    package, decorator = LAZY[kind]
    return {name: dict(options) for name, (_, options) in declarations(package, decorator).items()}


@lru_cache(maxsize=None)
def declarations(package: str, decorator: str) -> dict[str, tuple[str, tuple[tuple[str, object], ...]]]:
    """``{name: (module stem, keyword options)}`` for every declaration in the modules of ``package``
    (relative to ``dssl``), read from their syntax trees (nothing is imported): a class or function decorated
    ``@<decorator>("name", key=literal, ...)``, or a class decorated ``@<decorator>`` whose body sets
    ``name = "..."``. Two modules declaring one name raise."""
    folder = Path(__file__).resolve().parent.joinpath(*package.split("."))
    found: dict[str, tuple[str, tuple[tuple[str, object], ...]]] = {}
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            for name, options in _declarations(node, decorator):
                if name in found:
                    raise ValueError(f"{name!r} is declared in {package}.{found[name][0]} and {package}.{path.stem}")
                found[name] = (path.stem, options)
    return found


def _declarations(node: ast.stmt, decorator: str) -> list[tuple[str, tuple[tuple[str, object], ...]]]:
    """Every ``(name, options)`` a class or function declares: one function may implement several entries
    (the few-shot probe is both ``linear_probe_10pct`` and ``linear_probe_1pct``), one decorator each."""
    if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        return []
    found = []
    for mark in node.decorator_list:
        declared = _declaration(node, mark, decorator)
        if declared is not None:
            found.append(declared)
    return found


def _declaration(node: ast.ClassDef | ast.FunctionDef, mark: ast.expr,
                 decorator: str) -> tuple[str, tuple[tuple[str, object], ...]] | None:
    if isinstance(mark, ast.Call) and isinstance(mark.func, ast.Name) and mark.func.id == decorator:
        if mark.args and isinstance(mark.args[0], ast.Constant) and isinstance(mark.args[0].value, str):
            options = tuple((k.arg, ast.literal_eval(k.value)) for k in mark.keywords if k.arg)
            return mark.args[0].value, options
    if isinstance(mark, ast.Name) and mark.id == decorator and isinstance(node, ast.ClassDef):
        name = _class_name_attribute(node)
        return (name, ()) if name is not None else None
    return None


def _class_name_attribute(node: ast.ClassDef) -> str | None:
    for item in node.body:
        targets = item.targets if isinstance(item, ast.Assign) else [item.target] if isinstance(
            item, ast.AnnAssign) and item.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == "name" for t in targets):
            value = item.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
    return None

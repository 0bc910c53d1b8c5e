"""The SSL methods' names and hyper-parameters, read from their source without importing it.

The method registry (``dssl.methods.METHODS``) is filled by importing its modules, which import torch;
the params validator runs in every stage and at Snakemake's parse time and must stay light, and a
stage's code dependencies are the import closure of its entry module. So, as for the strategies
(``dssl.config.strategies``), the validator reads the declarations statically: each ``@register_method``
class of ``dssl/methods/*.py``, its ``name`` and the keyword-only arguments of its ``__init__`` (what
``SSLMethod.hparam_names`` accepts at run time) with their annotations and defaults. A test keeps this
reading equal to the imported registry.

A ``models.<name>.hparams`` value is checked against its argument's annotation where the annotation is
one this module can read (``bool``, ``int``, ``float``, ``str``, ``None``, ``Literal[...]``, ``tuple[...]``
and unions of them), and against its range where the argument declares one
(``mask_ratio: Annotated[float, Range(0.0, 1.0, high_open=True)]``, ``dssl.config.ranges``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from dssl.config.ranges import NumericOption, number_problem, range_in_source

METHOD_FOLDER = Path(__file__).resolve().parents[1] / "methods"


@dataclass(frozen=True)
class HParam:
    """One keyword-only constructor argument: its annotation (source text) and default (source text)."""

    name: str
    annotation: str | None
    default: str | None

    @property
    def option(self) -> NumericOption | None:
        """The declared number and range (``Annotated[..., Range(...)]``), None where none is declared."""
        return range_in_source(self.annotation)[1]


@dataclass(frozen=True)
class MethodDeclaration:
    name: str
    hparams: tuple[HParam, ...]

    @property
    def hparam_names(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hparams)

    def hparam(self, name: str) -> HParam:
        return next(h for h in self.hparams if h.name == name)


def _is_registered(node: ast.ClassDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "register_method" for d in node.decorator_list)


def _declaration(node: ast.ClassDef) -> MethodDeclaration | None:
    name, hparams = None, ()
    for item in node.body:
        if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "name" for t in item.targets):
            name = ast.literal_eval(item.value)
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            arguments = item.args
            hparams = tuple(
                HParam(arg.arg, ast.unparse(arg.annotation) if arg.annotation else None,
                       ast.unparse(default) if default is not None else None)
                for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults))
    return MethodDeclaration(str(name), hparams) if name else None


@lru_cache(maxsize=4)
def declared_methods(folder: Path = METHOD_FOLDER) -> dict[str, MethodDeclaration]:
    """Every registered SSL method of the folder by its params.yaml name."""
    declared = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.ClassDef) and _is_registered(node):
                found = _declaration(node)
                if found is not None:
                    declared.append(found)
    return {d.name: d for d in sorted(declared, key=lambda d: d.name)}


def value_problem(value: Any, annotation: str | None) -> str | None:
    """Why ``value`` (as YAML gives it) does not fit ``annotation`` (its type, then its declared range);
    None when it fits or when the annotation is not one this reader checks."""
    base, option = range_in_source(annotation)
    if base is None:
        return None
    try:
        fits = _fits(value, ast.parse(base, mode="eval").body)
    except _Unreadable:
        fits = True
    if not fits:
        return f"{value!r} is not {base}"
    return number_problem(value, option) if option is not None else None


class _Unreadable(Exception):
    """An annotation this reader does not check."""


_SIMPLE = {
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "None": lambda v: v is None,
}


def _fits(value: Any, node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and node.value is None:
        return value is None
    if isinstance(node, ast.Name) and node.id in _SIMPLE:
        return _SIMPLE[node.id](value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _fits(value, node.left) or _fits(value, node.right)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if node.value.id == "Literal":
            return value in [ast.literal_eval(e) for e in inner]
        if node.value.id in ("tuple", "Sequence", "list"):
            if not isinstance(value, (list, tuple)):
                return False
            if len(inner) == 2 and isinstance(inner[1], ast.Constant) and inner[1].value is Ellipsis:
                return all(_fits(v, inner[0]) for v in value)
            if node.value.id == "tuple":
                return len(value) == len(inner) and all(_fits(v, e) for v, e in zip(value, inner))
            return all(_fits(v, inner[0]) for v in value)
    raise _Unreadable(ast.unparse(node))

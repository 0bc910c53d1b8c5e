"""The federation strategies' names, options and frameworks, read from their source without importing it.

The strategy registry (``dssl.federation.strategies.STRATEGIES``) is filled by importing its modules,
which import torch and, through ``dssl.federation``, the simulators. The params validator runs in every
stage and at Snakemake's parse time and must stay light, and a stage's code dependencies are the import
closure of its entry module: importing the registry would make every stage depend on the federation
code. So the validator reads the same declarations statically: each ``@register_strategy("name")``
class of ``dssl/federation/strategies/*.py``, its ``frameworks`` and the keyword arguments of its
``__init__``, following ``**kwargs`` to its base class (as ``Strategy.option_names`` does at run time).
A test keeps this reading equal to the imported registry. An option's value is checked against its
annotation, type and declared range (``gamma_max: Annotated[float, Range(0.0)]``, ``dssl.config.ranges``);
what depends on several options together is checked when the strategy is built, before training starts.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from dssl.config.methods import value_problem

STRATEGY_FOLDER = Path(__file__).resolve().parents[1] / "federation" / "strategies"
DEFAULT_FRAMEWORKS = ("fl", "decl")


@dataclass(frozen=True)
class StrategyDeclaration:
    name: str
    options: tuple[str, ...]
    frameworks: tuple[str, ...]
    defaults: tuple[tuple[str, object], ...] = ()   # (option, default) where the default is a literal
    annotations: tuple[tuple[str, str], ...] = ()   # (option, annotation source text) where annotated

    def value_problem(self, option: str, value: object) -> str | None:
        """Why ``value`` does not fit the option's annotation (type and declared range); None when it fits."""
        return value_problem(value, dict(self.annotations).get(option))

    def resolved(self, entry: dict) -> dict[str, object]:
        """The options a params entry runs with: its own values over the declared defaults."""
        return {**dict(self.defaults), **{k: v for k, v in entry.items() if k in self.options}}


@dataclass(frozen=True)
class _ClassFacts:
    registered_as: str | None
    base: str | None
    init_options: tuple[str, ...] | None  # None: no __init__ of its own
    passes_kwargs: bool
    frameworks: tuple[str, ...] | None
    defaults: tuple[tuple[str, object], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()


def _registered_name(node: ast.ClassDef) -> str | None:
    for decorator in node.decorator_list:
        if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name)
                and decorator.func.id == "register_strategy" and decorator.args
                and isinstance(decorator.args[0], ast.Constant)):
            return str(decorator.args[0].value)
    return None


def _class_facts(node: ast.ClassDef) -> _ClassFacts:
    init_options, passes_kwargs, frameworks, defaults, annotations = None, False, None, (), ()
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            arguments = item.args
            named = [*arguments.posonlyargs, *arguments.args][1:] + arguments.kwonlyargs
            init_options = tuple(a.arg for a in named)
            passes_kwargs = arguments.kwarg is not None
            defaults = _literal_defaults(arguments)
            annotations = tuple((a.arg, ast.unparse(a.annotation)) for a in named if a.annotation is not None)
        targets = (item.targets if isinstance(item, ast.Assign)
                   else [item.target] if isinstance(item, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "frameworks" for t in targets) and item.value is not None:
            frameworks = tuple(ast.literal_eval(item.value))
    base = next((b.id for b in node.bases if isinstance(b, ast.Name)), None)
    return _ClassFacts(_registered_name(node), base, init_options, passes_kwargs, frameworks, defaults, annotations)


def _literal_defaults(arguments: ast.arguments) -> tuple[tuple[str, object], ...]:
    """(argument, default) for every default of ``__init__`` that is a literal (``"paper"``, ``0.4``, ``None``)."""
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
    pairs += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
    found = []
    for argument, node in pairs:
        try:
            found.append((argument.arg, ast.literal_eval(node)))
        except ValueError:
            continue
    return tuple(found)


def _resolve(name: str, classes: dict[str, _ClassFacts]) -> StrategyDeclaration:
    options: list[str] = []
    defaults: dict[str, object] = {}
    annotations: dict[str, str] = {}
    frameworks, current, following = None, classes[name], True
    while current is not None:
        if following and current.init_options is not None:
            options += [o for o in current.init_options if o not in options]
            defaults = {**dict(current.defaults), **defaults}   # a subclass's default wins
            annotations = {**dict(current.annotations), **annotations}
            following = current.passes_kwargs
        frameworks = frameworks or current.frameworks
        current = classes.get(current.base) if current.base else None
    registered = classes[name].registered_as
    return StrategyDeclaration(str(registered), tuple(options), frameworks or DEFAULT_FRAMEWORKS,
                               tuple((k, v) for k, v in defaults.items() if k in options),
                               tuple((k, v) for k, v in annotations.items() if k in options))


@lru_cache(maxsize=4)
def declared_strategies(folder: Path = STRATEGY_FOLDER) -> dict[str, StrategyDeclaration]:
    """Every registered strategy of the folder by its params.yaml name."""
    classes: dict[str, _ClassFacts] = {}
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = _class_facts(node)
    declared = [_resolve(name, classes) for name, facts in classes.items() if facts.registered_as]
    return {d.name: d for d in sorted(declared, key=lambda d: d.name)}

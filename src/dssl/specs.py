"""What every spec of a registry entry shares: its config dataclass read as params options (torch-free).

A dataset, a partition scheme or a topology is declared once, as a small frozen spec whose ``config`` is a
dataclass: each field a key of its ``params.yaml`` entry, with its type, its default (none: the key is
required) and, for a number, its valid range (``Annotated[int, Range(...)]``, ``dssl.config.ranges``). The
validator reads the keys, types and ranges from it; the data code reads the defaults. A field may carry
``metadata={"hint": ...}`` (what the validator says when the value is missing or bad) and
``metadata={"options": <dataclass>}`` (a mapping whose own keys that dataclass declares). Where an entry is
implemented is written relative to ``dssl`` (``"data.partition"``) and imported only when used: a full
module name in a string would count as an import in a stage's code lineage (``dssl.pipeline.codedeps``).
Standard library only.
"""

from __future__ import annotations

import importlib
import typing
from dataclasses import MISSING, Field, dataclass, fields
from functools import lru_cache
from typing import Any, ClassVar, Literal, get_args, get_origin

from dssl.config.ranges import range_problems
from dssl.registry import import_cpu

__all__ = ["option_defaults", "option_keys", "required_options", "choices", "nested_options", "field_hint",
           "implementation", "Options", "NoOptions", "EntrySpec", "option_problems"]


def option_keys(config: type) -> tuple[str, ...]:
    """The params keys ``config`` declares, in declaration order."""
    return tuple(f.name for f in fields(config))


def _default(field: Field) -> Any:
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:
        return field.default_factory()
    return None


def option_defaults(config: type) -> dict[str, Any]:
    """``{key: default}`` of every option (a fresh copy each call); a required key maps to None."""
    return {f.name: _default(f) for f in fields(config)}


def required_options(config: type) -> tuple[str, ...]:
    """The keys without a default: the params entry must set them."""
    return tuple(f.name for f in fields(config) if f.default is MISSING and f.default_factory is MISSING)


@lru_cache(maxsize=None)
def _hints(config: type) -> dict[str, Any]:
    return typing.get_type_hints(config, include_extras=True)


def _base(hint: Any) -> Any:
    """The type under ``Annotated[...]``."""
    return get_args(hint)[0] if get_origin(hint) is typing.Annotated else hint


def choices(config: type, key: str) -> tuple[Any, ...] | None:
    """The values a ``Literal[...]`` option allows, in declaration order (None for any other option)."""
    base = _base(_hints(config)[key])
    return get_args(base) if get_origin(base) is Literal else None


def base_type(config: type, key: str) -> Any:
    """An option's declared type without its range (``float``, ``bool``, ``str | None``, ...)."""
    return _base(_hints(config)[key])


def nested_options(config: type) -> dict[str, type]:
    """``{key: dataclass}`` of the options that are mappings with keys of their own."""
    return {f.name: f.metadata["options"] for f in fields(config) if "options" in f.metadata}


def field_hint(config: type, key: str) -> str:
    """The hint declared beside an option (empty when none)."""
    return next((str(f.metadata.get("hint", "")) for f in fields(config) if f.name == key), "")


def implementation(module: str, attribute: str | None = None) -> Any:
    """Import ``dssl.<module>`` (given relative to ``dssl``) and return it, or its ``attribute``."""
    name = f"{__package__ or 'dssl'}.{module}"
    import_cpu(name)
    loaded = importlib.import_module(name)
    return loaded if attribute is None else getattr(loaded, attribute)


def option_problems(config: Any) -> list[str]:
    """``"<key>: <why>"`` for every value of a config instance outside its declaration: a number outside its
    range (``dssl.config.ranges``), a ``Literal`` option not one of its values."""
    problems = range_problems(config)
    for key in option_keys(type(config)):
        allowed = choices(type(config), key)
        if allowed is not None and getattr(config, key) not in allowed:
            problems.append(f"{key}: must be one of {', '.join(map(repr, allowed))}, got {getattr(config, key)!r}")
    return problems


class Options:
    """Base of an entry's config dataclass: an instance built in code (a test, a benchmark, a stage from its
    validated params) is checked against the same declaration the params validator reads, when it is made."""

    def __post_init__(self) -> None:
        problems = option_problems(self)
        if problems:
            raise ValueError(f"{type(self).__name__}: {'; '.join(problems)}")


@dataclass(frozen=True)
class NoOptions(Options):
    """The config of an entry with nothing to set (a mixing rule, an alignment term): its params entry is its
    name alone."""


@dataclass(frozen=True)
class EntrySpec:
    """A registry entry declared once, torch-free: its ``params.yaml`` name, its options as a config dataclass
    (an :class:`Options`: keys, types, defaults, ranges, and a docstring citing its paper with the paper's
    defaults) and the code implementing it, ``"<module>:<attribute>"`` relative to ``dssl`` (``"methods.byol:BYOL"``),
    imported only by :meth:`load`."""

    kind: ClassVar[str] = "entry"   # what a message calls it: "method", "strategy", "backbone", ...

    name: str
    config: type
    code: str

    @property
    def module(self) -> str:
        """The full name of the module implementing the entry (its code lineage)."""
        return f"{__package__ or 'dssl'}.{self.code.partition(':')[0]}"

    def load(self) -> Any:
        """The implementing class or function, imported now (with the CPU as torch's default device). A class
        is given the entry's name as its ``name``: the name is declared here, once."""
        loaded = implementation(*self.code.split(":"))
        if isinstance(loaded, type):
            loaded.name = self.name
        return loaded

    def options(self, values: dict[str, Any] | None = None) -> Any:
        """The config of a params entry's values, the declared defaults for the rest (checked when made). A key
        the config does not declare is a ValueError naming the declared ones, so a typo fails loudly."""
        values = dict(values or {})
        declared = option_keys(self.config)
        unknown = sorted(set(values) - set(declared))
        if unknown:
            raise ValueError(f"{self.kind} {self.name!r} has no option {', '.join(map(repr, unknown))}; "
                             f"its options: {', '.join(declared) or 'none'}")
        return self.config(**values)

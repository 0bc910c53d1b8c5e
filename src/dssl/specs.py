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
from dataclasses import MISSING, Field, fields
from functools import lru_cache
from typing import Any, Literal, get_args, get_origin

__all__ = ["option_defaults", "option_keys", "required_options", "choices", "nested_options", "field_hint",
           "implementation"]


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
    loaded = importlib.import_module(f"{__package__ or 'dssl'}.{module}")
    return loaded if attribute is None else getattr(loaded, attribute)

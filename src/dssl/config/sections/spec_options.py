"""An entry's options checked against the config dataclass its spec declares (``dssl.specs``): the keys the
dataclass declares, each value of the declared type (a number in its range, true or false, one of a
``Literal``'s values, a string, a mapping with keys of its own) and the keys without a default present. The
datasets, partitions and graphs validators read everything from there: no key list or range is written
twice."""

from __future__ import annotations

import types
import typing
from typing import Any, Iterable, Mapping

from dssl.config.checker import Checker
from dssl.config.ranges import allows_none, declared_options
from dssl.specs import base_type, choices, field_hint, nested_options, option_keys, required_options


def check_options(c: Checker, entry: dict, path: str, options: type, *, hints: Mapping[str, str] | None = None,
                  skip: Iterable[str] = ()) -> dict[str, Any]:
    """Check ``entry``'s values of the keys ``options`` declares (all but ``skip``); each problem is added at
    its key path with the field's hint (``hints`` overrides it). Returns the keys whose values are good."""
    skipped, good = set(skip), {}
    for key in option_keys(options):
        if key in skipped:
            continue
        value = _checked(c, entry, key, path, options, (hints or {}).get(key) or field_hint(options, key))
        if value is not None:
            good[key] = value
    return good


def check_unknown(c: Checker, entry: dict, path: str, *options: type) -> None:
    """Every key of ``entry`` none of the dataclasses ``options`` declares is an unknown key."""
    c.unknown_keys(entry, {key for cls in options for key in option_keys(cls)}, path)


def _checked(c: Checker, entry: dict, key: str, path: str, options: type, hint: str) -> Any:
    if key in entry and entry[key] is None and not allows_none(base_type(options, key)):
        c.add(f"{path}.{key}", f"must be {_kind(options, key)}, got null", hint or _range_hint(options, key))
        return None
    if key in declared_options(options):
        return c.declared(entry, key, path, options, required=key in required_options(options), hint=hint)
    if entry.get(key) is None:
        if key in required_options(options):
            c.add(f"{path}.{key}", "missing", hint)
        return None
    allowed = choices(options, key)
    if allowed is not None:
        return c.choice(entry, key, allowed, path)
    if key in nested_options(options):
        return _nested(c, entry[key], f"{path}.{key}", nested_options(options)[key])
    return _typed(c, entry[key], f"{path}.{key}", base_type(options, key), hint)


def _nested(c: Checker, value: Any, path: str, options: type) -> dict | None:
    mapping = c.mapping(value, path)
    if mapping is None:
        return None
    check_unknown(c, mapping, path, options)
    check_options(c, mapping, path, options)
    return mapping


def _members(declared: Any) -> tuple:
    if typing.get_origin(declared) in (typing.Union, types.UnionType):
        return typing.get_args(declared)
    return (declared,)


def _kind(options: type, key: str) -> str:
    """What a value of ``key`` is, for a message: a number, an integer, true or false, a string, a mapping."""
    if key in declared_options(options):
        return "an integer" if declared_options(options)[key].integer else "a number"
    if key in nested_options(options):
        return "a mapping"
    if choices(options, key) is not None:
        return "one of: " + ", ".join(map(str, choices(options, key)))
    members = {m for m in _members(base_type(options, key))}
    return "true or false" if members == {bool} else "a string" if members == {str} else "a value"


def _range_hint(options: type, key: str) -> str:
    declared = declared_options(options).get(key)
    return f"{key}: {declared.range}" if declared is not None else ""


def _typed(c: Checker, value: Any, path: str, declared: Any, hint: str) -> Any:
    """A true/false or a string option; any other type is taken as it is."""
    members = [m for m in _members(declared) if m is not type(None)]
    if value is None:
        return None
    if members == [bool] and not isinstance(value, bool):
        c.add(path, f"must be true or false, got {value!r}", hint)
        return None
    if members == [str] and not isinstance(value, str):
        c.add(path, f"must be a string, got {value!r}", hint)
        return None
    return value

"""Valid ranges of numeric options, declared once, where the option is declared.

An option carries its range in its annotation, a field of a torch-free config dataclass:
``mask_ratio: Annotated[float, Range(0.0, 1.0, high_open=True)]`` in a method's spec (``dssl.config.methods``),
``rounds: Annotated[int, Range(1, 100_000)]`` in a section's options. ``Annotated`` is transparent at run time
(the field still holds a float); the params validator reads the declaration from the type hints
(``declared_options``), and an instance built in code checks itself against it (``range_problems``).
The base type says integer or float (``int``: a whole number; ``float``: any finite number; ``| None``:
``null`` allowed, e.g. "derive it from the backbone"); for a tuple or a list of numbers the range holds
for every element. Standard library only: it runs in every stage and at Snakemake's parse time.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Annotated, Any, Union, get_args, get_origin

__all__ = ["Range", "NumericOption", "declared_options", "number_problem", "range_problems",
           "allows_none"]


def _text(bound: float) -> str:
    return repr(bound) if isinstance(bound, int) else f"{bound:g}"


@dataclass(frozen=True)
class Range:
    """The closed or open interval a number must lie in; ``None`` leaves that side unbounded."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __post_init__(self) -> None:
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"empty range: low {self.low} > high {self.high}")

    def contains(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {_text(self.low)}" if self.low is not None else "any number"
        if self.low is None:
            return f"{'<' if self.high_open else '<='} {_text(self.high)}"
        return (f"{'(' if self.low_open else '['}{_text(self.low)}, "
                f"{_text(self.high)}{')' if self.high_open else ']'}")

    def problem(self, value: float) -> str | None:
        """Why ``value`` lies outside, naming the side it crosses (``must be >= 1, got 0``); None inside."""
        if self.contains(value):
            return None
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return f"must be {'>' if self.low_open else '>='} {_text(self.low)}, got {value}"
        return f"must be {'<' if self.high_open else '<='} {_text(self.high)}, got {value}"


@dataclass(frozen=True)
class NumericOption:
    """A declared number: whole (``integer``) or not, ``null`` allowed or not, and its range."""

    integer: bool
    optional: bool
    range: Range


def number_problem(value: Any, option: NumericOption) -> str | None:
    """Why a params value (as YAML gives it) is not the option's number, or lies outside its range; a list
    or tuple is checked element by element. None when it fits."""
    if value is None and option.optional:
        return None
    for element in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(element, bool) or not isinstance(element, (int, float)) or not math.isfinite(element):
            return f"must be {'an integer' if option.integer else 'a number'}, got {element!r}"
        if option.integer and not isinstance(element, int):
            return f"must be an integer, got {element!r}"
        problem = option.range.problem(element)
        if problem:
            return problem
    return None


# ------------------------------------------------------------------------------------------------
# reading the declarations


@lru_cache(maxsize=None)
def declared_options(cls: type) -> dict[str, NumericOption]:
    """Every field of dataclass ``cls`` annotated ``Annotated[<number type>, Range(...)]``, by name."""
    hints = typing.get_type_hints(cls, include_extras=True)
    found = {}
    for field in fields(cls):
        hint = hints[field.name]
        if get_origin(hint) is not Annotated:
            continue
        base, *extras = get_args(hint)
        declared = next((e for e in extras if isinstance(e, Range)), None)
        if declared is not None:
            found[field.name] = NumericOption(_is_integer(base), allows_none(base), declared)
    return found


def range_problems(instance: Any) -> list[str]:
    """``"<field>: <why>"`` for every field of a dataclass instance that lies outside the range its annotation
    declares (``declared_options``): a config built in code is checked against the same declaration the
    params validator reads, in its ``__post_init__``."""
    problems = []
    for name, option in declared_options(type(instance)).items():
        problem = number_problem(getattr(instance, name), option)
        if problem:
            problems.append(f"{name}: {problem}")
    return problems


def _members(base: Any) -> tuple:
    if get_origin(base) in (Union, types.UnionType):
        return get_args(base)
    if get_origin(base) in (tuple, list):
        return tuple(a for a in get_args(base) if a is not Ellipsis)
    return (base,)


def _is_integer(base: Any) -> bool:
    return all(m is int for m in _members(base) if m is not type(None))


def allows_none(base: Any) -> bool:
    """Whether a type hint (``float | None``, ``Optional[int]``) admits ``None``: a params value may be null."""
    return type(None) in _members(base)

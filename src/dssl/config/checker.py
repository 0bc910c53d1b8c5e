"""The pieces params validation is built from: a ``Problem`` (key path, message, hint), the
``ParamsError`` that lists them, the ``Checker`` that collects them while walking a params mapping,
and the registry of section validators (``config.sections`` registers one per params section).
Torch-free, like all of validation."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from dssl.config.ranges import declared_options, number_problem

ENTRY_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Problem:
    path: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        hint = f"  (hint: {self.hint})" if self.hint else ""
        return f"{self.path}: {self.message}{hint}"


class ParamsError(Exception):
    """Raised with every problem found in a params file."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = problems
        lines = [f"{source}: {len(problems)} problem(s)"] + [f"  - {p}" for p in problems]
        # one problem (an unreadable file, a duplicate key) reads as one line
        super().__init__(f"{source}: {problems[0]}" if len(problems) == 1 else "\n".join(lines))


# --------------------------------------------------------------------------------------------
# small checkers: each returns a list of problems for one value


class Checker:
    """Collects problems while walking one params mapping."""

    def __init__(self, params: dict, root: Path):
        self.params = params
        self.root = root
        self.problems: list[Problem] = []

    def add(self, path: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint))

    def section(self, name: str, required: bool = True) -> dict:
        value = self.params.get(name)
        if value is None:
            if required:
                self.add(name, "missing section", f"add a '{name}:' mapping")
            return {}
        if not isinstance(value, dict):
            self.add(name, f"must be a mapping, got {type(value).__name__}")
            return {}
        return value

    def entries(self, section: str, required: bool = True) -> Iterator[tuple[str, str, dict]]:
        """(name, key path, spec) of every entry of a grid section whose spec is a mapping.

        An entry's name becomes a params key (``strategies.<name>``), part of stage names and of folder
        names: letters, digits, '-' and '_' only (DVC reads a '.' in a params key as nesting).
        """
        for name, spec in self.section(section, required).items():
            path = f"{section}.{name}"
            if not isinstance(name, str) or not ENTRY_NAME.fullmatch(name):
                self.add(path, f"the name {name!r} may hold only letters, digits, '-' and '_'",
                         "write a decimal point as 'p' (e.g. alpha 0.01 -> 'a0p01')")
                continue
            spec = self.mapping(spec, path)
            if spec is not None:
                yield name, path, spec

    def mapping(self, value: Any, path: str) -> dict | None:
        if not isinstance(value, dict):
            self.add(path, f"must be a mapping, got {type(value).__name__}")
            return None
        return value

    def unknown_keys(self, entry: dict, allowed: Iterable[str], path: str) -> None:
        allowed = set(allowed)
        for key in entry:
            if key not in allowed:
                self.add(f"{path}.{key}", "unknown key", f"allowed keys: {', '.join(sorted(allowed))}")

    def choice(self, entry: dict, key: str, options: Iterable[str], path: str) -> str | None:
        value = entry.get(key)
        options = sorted(options)
        if value is None:
            self.add(f"{path}.{key}", "missing", f"one of: {', '.join(options)}")
            return None
        if value not in options:
            self.add(f"{path}.{key}", f"unknown value {value!r}", f"one of: {', '.join(options)}")
            return None
        return value

    def number(
        self,
        entry: dict,
        key: str,
        path: str,
        *,
        integer: bool = False,
        low: float | None = None,
        high: float | None = None,
        low_open: bool = False,
        required: bool = True,
        hint: str = "",
    ) -> float | None:
        value = entry.get(key)
        where = f"{path}.{key}"
        if value is None:
            if required:
                self.add(where, "missing", hint)
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.add(where, f"must be a number, got {value!r}", hint)
            return None
        if integer and int(value) != value:
            self.add(where, f"must be an integer, got {value!r}", hint)
            return None
        if low is not None and (value <= low if low_open else value < low):
            self.add(where, f"must be {'>' if low_open else '>='} {low}, got {value}", hint)
            return None
        if high is not None and value > high:
            self.add(where, f"must be <= {high}, got {value}", hint)
            return None
        return value

    def declared(self, entry: dict, key: str, path: str, options: type, *, required: bool = False,
                 hint: str = "") -> Any:
        """``entry[key]`` checked against the number and range the dataclass ``options`` declares for ``key``
        (``dssl.config.ranges``); the value, or None when it is missing or bad (each problem added once)."""
        option = declared_options(options)[key]
        where = f"{path}.{key}"
        if entry.get(key) is None and not (key in entry and option.optional):
            if required:
                self.add(where, "missing", hint or f"{key}: {option.range}")
            return None
        problem = number_problem(entry[key], option)
        if problem:
            self.add(where, problem, hint or f"{key}: {option.range}")
            return None
        return entry[key]

    def name_of(self, entry: dict, key: str, names: Iterable[str], path: str, what: str) -> str | None:
        value = entry.get(key)
        names = sorted(names)
        if value is None:
            self.add(f"{path}.{key}", "missing", f"name one of the {what}: {', '.join(names) or '(none defined)'}")
            return None
        if value not in names:
            self.add(
                f"{path}.{key}",
                f"{value!r} is not defined in '{what}'",
                f"one of: {', '.join(names) or '(none defined)'}",
            )
            return None
        return value


SectionValidator = Callable[[Checker], None]
SECTION_VALIDATORS: list[SectionValidator] = []


def section_validator(func: SectionValidator) -> SectionValidator:
    SECTION_VALIDATORS.append(func)
    return func

"""Name -> object registries whose keys are the strings used in ``params.yaml`` (torch-free)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

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
    """A ``dict`` from name to entry whose failed lookups raise :class:`UnknownNameError`."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator that stores its argument under ``name`` (each name once)."""

        def add(entry: T) -> T:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self[name] = entry
            return entry

        return add

    def __missing__(self, name: str) -> T:
        known = ", ".join(sorted(self))
        raise UnknownNameError(f"unknown {self.kind} {name!r}; known: {known}")

"""A list of names that another section defines (``models``, ``partitions``, ``graphs``, ...), checked
name by name at its own key path."""

from __future__ import annotations

from dssl.config.checker import Checker


def _name_list(c: Checker, entry: dict, key: str, names, path: str, what: str) -> list:
    values = entry.get(key)
    if not isinstance(values, list) or not values:
        c.add(f"{path}.{key}", "must be a non-empty list", f"names from '{what}'")
        return []
    for i, value in enumerate(values):
        if value not in names:
            c.add(f"{path}.{key}[{i}]", f"{value!r} is not defined in '{what}'",
                  f"one of: {', '.join(sorted(names)) or '(none defined)'}")
    return [v for v in values if v in names]

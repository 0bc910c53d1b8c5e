"""The top level of a params file: known sections only."""

from __future__ import annotations

from dssl.config.checker import Checker


KNOWN_SECTIONS = {"profile", "seeds", "datasets", "partitions", "graphs", "improved_graphs", "models", "strategies",
                  "pretrain", "evaluate", "report", "theory", "weight_distance", "features",
                  "checkpoint"}


def check_sections(c: Checker) -> None:
    c.unknown_keys(c.params, KNOWN_SECTIONS, "<top level>")

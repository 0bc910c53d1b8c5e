"""YAML parsing with libyaml where PyYAML was built with it, refusing duplicate keys.

Every stage reads params.yaml and, under DVC, every lock file (``dssl.tracking.inputs``): ~270 KiB of YAML
at the embedded default, which PyYAML's pure-Python parser takes ~1 s for, per stage. ``CSafeLoader``
parses it ~6x faster with the same safe constructor and resolver, so the values are the same.

A mapping that names a key twice is an error here, as it is for DVC (ruamel) and the YAML spec: PyYAML
would silently keep the last value, so ``dssl validate`` would pass a params file that ``dvc repro``
then refuses, or a stage would read another value than the one a reader sees first. This module
imports nothing from dssl, so every layer can use it.
"""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(yaml.YAMLError):
    """A mapping names the same key twice; the message has the key path and both lines."""

    def __init__(self, path: str, line: int, first_line: int):
        self.path, self.line, self.first_line = path, line, first_line
        super().__init__(f"duplicate key {path} at line {line} (first at line {first_line}): keep one of them")


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with libyaml's parser when available (raises ``yaml.YAMLError`` as it does, and
    ``DuplicateKeyError``, one, for a key a mapping names twice)."""
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_duplicates(node, "")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _refuse_duplicates(root: yaml.Node, where: str) -> None:
    """Walk the node tree (iteratively: deep documents, aliases visited once) for repeated mapping keys."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(root, where)]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key, value in node.value:
                if key.tag == MERGE_TAG or not isinstance(key, yaml.ScalarNode):
                    stack.append((value, path))
                    continue
                name = f"{path}.{key.value}" if path else str(key.value)
                identity = (key.tag, key.value)
                if identity in first:
                    raise DuplicateKeyError(name, key.start_mark.line + 1, first[identity])
                first[identity] = key.start_mark.line + 1
                stack.append((value, name))
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, f"{path}[{index}]") for index, item in enumerate(node.value)]

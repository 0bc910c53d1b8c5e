"""YAML parsing with libyaml where PyYAML was built with it.

Every stage reads params.yaml and, under DVC, every lock file (``dssl.tracking.inputs``): ~270 KiB of YAML
at the embedded default, which PyYAML's pure-Python parser takes ~1 s for, per stage. ``CSafeLoader``
parses it ~6x faster with the same safe constructor and resolver, so the values are the same. This
module imports nothing from dssl, so every layer can use it.
"""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with libyaml's parser when available (raises ``yaml.YAMLError`` as it does)."""
    return yaml.load(text, Loader=SAFE_LOADER)

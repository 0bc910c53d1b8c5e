"""params.yaml: the one source of truth, loaded and validated before any work starts.

Every problem is reported with its key path (``partitions.fl-label.alpha``) and a hint, all at once,
so a researcher fixes the file in one pass. Validation imports nothing heavy (no torch, no MLflow):
it runs at the start of every stage and at Snakemake's parse time.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from dssl.config import sections  # noqa: F401  (registers the section validators)
from dssl.config.checker import SECTION_VALIDATORS, Checker, ParamsError, Problem

DEFAULT_PARAMS = Path("params.yaml")


def read_params(path: Path | str = DEFAULT_PARAMS) -> dict:
    """Parse a params file; unreadable or non-mapping YAML is a ParamsError."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(str(path), [Problem("<file>", "no such params file", "pass an existing YAML file")])
    try:
        params = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ParamsError(str(path), [Problem("<file>", f"not valid YAML: {err}", "fix the syntax")]) from err
    if not isinstance(params, dict):
        raise ParamsError(str(path), [Problem("<file>", "top level must be a mapping of sections")])
    return params


def load_params(path: Path | str = DEFAULT_PARAMS, root: Path | None = None) -> dict:
    """Read and validate a params file; raise ParamsError listing every problem."""
    path = Path(path)
    params = read_params(path)
    problems = validate(params, root if root is not None else path.resolve().parent)
    if problems:
        raise ParamsError(str(path), problems)
    return params


def validate(params: dict, root: Path) -> list[Problem]:
    """All problems of a params mapping; ``root`` resolves relative dataset folders."""
    checker = Checker(params, Path(root))
    for validator in SECTION_VALIDATORS:
        validator(checker)
    return checker.problems

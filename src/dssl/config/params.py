"""params.yaml: the one source of truth, loaded and validated before any work starts.

Every problem is reported with its key path (``partitions.fl-label.alpha``) and a hint, all at once,
so a researcher fixes the file in one pass. Validation imports nothing heavy (no torch, no MLflow):
it runs at the start of every stage and at Snakemake's parse time.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from dssl.config import sections  # noqa: F401  (registers the section validators)
from dssl.config.checker import SECTION_VALIDATORS, Checker, ParamsError, Problem
from dssl.yamlio import DuplicateKeyError, load_yaml

DEFAULT_PARAMS = Path("params.yaml")
PROJECT_MARKER = "Snakefile"


def project_of(start: Path | str) -> Path | None:
    """The project holding ``start``: the nearest folder, from ``start`` up, with the Snakefile."""
    here = Path(start).resolve()
    return next((folder for folder in (here, *here.parents) if (folder / PROJECT_MARKER).is_file()), None)


def params_root(path: Path | str) -> Path:
    """What relative folders of a params file (``datasets.<name>.root``) are relative to: the project
    holding the file (configs/paper.yaml's too), else the file's own folder."""
    folder = Path(path).resolve().parent
    return project_of(folder) or folder


def read_params(path: Path | str = DEFAULT_PARAMS) -> dict:
    """Parse a params file; unreadable or non-mapping YAML is a ParamsError."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(str(path), [Problem("<file>", "no such params file", _missing_hint(path))])
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ParamsError(str(path), [Problem("<file>", f"not UTF-8 text: byte 0x{raw[err.start]:02x} at byte offset "
                                              f"{err.start} (line {line})", "save the file as UTF-8")]) from None
    try:
        params = load_yaml(text)
    except DuplicateKeyError as err:
        raise ParamsError(str(path), [Problem(err.path, f"named twice, at line {err.first_line} and line {err.line}",
                                              "keep one of them (DVC refuses a file with a duplicate key)")]) from None
    except yaml.YAMLError as err:
        raise ParamsError(str(path), [Problem("<file>", f"not valid YAML: {err}", "fix the syntax")]) from err
    if not isinstance(params, dict):
        raise ParamsError(str(path), [Problem("<file>", "top level must be a mapping of sections")])
    return params


def _missing_hint(path: Path) -> str:
    """Where a params file named relative to a subfolder of a project probably is: the project root."""
    if path.is_absolute():
        return "pass an existing YAML file"
    project = project_of(Path.cwd())
    if project is not None and project != Path.cwd().resolve() and (project / path).is_file():
        return f"run from the project root: cd {os.path.relpath(project)}"
    return "pass an existing YAML file"


def load_params(path: Path | str = DEFAULT_PARAMS, root: Path | None = None) -> dict:
    """Read and validate a params file; raise ParamsError listing every problem."""
    path = Path(path)
    params = read_params(path)
    problems = validate(params, root if root is not None else params_root(path))
    if problems:
        raise ParamsError(str(path), problems)
    return params


def validate(params: dict, root: Path) -> list[Problem]:
    """All problems of a params mapping; ``root`` resolves relative dataset folders."""
    checker = Checker(params, Path(root))
    for validator in SECTION_VALIDATORS:
        validator(checker)
    return checker.problems

"""Stage outputs on disk: one error for a damaged file, checked readers, and bit-stable floats.

A stage output (prepared data, partition, graph, result file, model weights, checkpoint) can be
missing, truncated by a full disk or an interrupted copy, or edited by hand. The readers here turn
every such case into one ``ArtifactError`` that names the file, says what is wrong and how to get a
good copy back, instead of a traceback from zipfile, json or pickle deep inside a stage. A write that
fails (a full disk, a read-only folder) is a ``WriteError`` naming the file and what to do
(``writing``, ``write_error``); the writers remove their temporary files first.

Floats written into an artifact go through ``stable_float``/``stable_floats``: the last bits of exp,
log, BLAS and LAPACK results differ between CPUs (SIMD dispatch) and library builds, and an output
written with every bit would then differ from machine to machine.

This module imports nothing from dssl, so every layer can use it.
"""

from __future__ import annotations

import errno
import json
import math
import os
import pickle
import shutil
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

__all__ = [
    "ArtifactError", "WriteError", "check_keys", "default_recovery", "load_npz", "load_torch", "read_json",
    "require_file", "stable_float", "stable_floats", "write_error", "writing",
]

# Significant digits of floats written into artifacts: far above any precision a reader needs, and
# far below the ~16 digits that vary with the CPU (a value changes its digits only when it lies within
# ~1e-15 relative of a rounding boundary, a chance of ~1e-5 at 10 digits).
SIGNIFICANT_DIGITS = 10
# Values smaller than this are written as 0: noise around zero (an eigenvalue of 1e-17 or -2e-16)
# has no stable significant digits at all.
ABSOLUTE_DECIMALS = 12

TypeSpec = type | tuple[type, ...]


class ArtifactError(ValueError):
    """A stage output that is missing, truncated or malformed.

    ``path`` is the file, ``problem`` what is wrong with it; ``stage`` (when known) the stage that
    produces it; ``recovery`` replaces the default advice (restore with DVC or re-run the stage).
    """

    def __init__(self, path: Path | str, problem: str, stage: str | None = None,
                 recovery: str | None = None):
        self.path = Path(path)
        self.problem = problem.rstrip(". ")
        self.stage = stage
        self.recovery = recovery or default_recovery(self.path, stage)
        super().__init__(f"{self.path}: {self.problem}. {self.recovery}")

    def __reduce__(self) -> tuple:
        # Exceptions pickle their message only; rebuild from the parts (worker processes, xdist).
        return type(self), (self.path, self.problem, self.stage, self.recovery)


# A write that fails for want of room, or of permission, and what it says to do about it.
_FULL = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
         errno.EFBIG: "file too large for the file system or the process's file size limit"}
_LOCKED = {errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
           errno.EPERM: "operation not permitted"}


# torch's zip writer (torch.save) reports a failed write as a RuntimeError of its C++ code
_TORCH_WRITER = "inline_container.cc"


class WriteError(ArtifactError):
    """A stage output or checkpoint that could not be written (a full disk, a read-only folder): the
    file, why, and what to do; the writer's temporary files are already removed."""


def _existing_folder(path: Path) -> Path:
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def write_error(err: BaseException, path: Path | str) -> WriteError | None:
    """``err`` as a ``WriteError`` naming the file it names (else ``path``), or None when it is no failed
    write: an OSError of a full disk or a read-only folder, or torch's writer failing (the OSError it
    was handling, if any; else a full disk when the file system has less than 1 MiB free)."""
    if isinstance(err, WriteError):
        return err
    if isinstance(err, RuntimeError) and _TORCH_WRITER in str(err):
        # torch raises its own error while it closes a file whose write failed; the OSError is its context
        err = next((e for e in _chain(err) if isinstance(e, OSError)), err)
    if isinstance(err, OSError) and err.errno in (*_FULL, *_LOCKED):
        target, full = Path(err.filename or path), err.errno in _FULL
        reason = (_FULL | _LOCKED)[err.errno]
    elif isinstance(err, RuntimeError) and _TORCH_WRITER in str(err):
        target = Path(path)
        full = shutil.disk_usage(_existing_folder(target)).free < 2 ** 20
        reason = "no space left on the device" if full else "torch could not write it"
    else:
        return None
    folder = _existing_folder(target)
    if full:
        advice = f"Free space on the file system that holds {folder} (`df -h {folder}`)"
    else:
        advice = f"Make {folder} writable (or run from a writable copy of the project)"
    return WriteError(target, f"cannot be written ({reason})",
                      recovery=f"{advice}, then run the same command again (training resumes from its last "
                               "checkpoint).")


def _chain(err: BaseException) -> Iterator[BaseException]:
    """The exceptions ``err`` was raised from or while handling, nearest first."""
    seen: set[int] = set()
    link: BaseException | None = err
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


@contextmanager
def writing(path: Path | str, *temporaries: Path) -> Iterator[None]:
    """Write ``path`` in the block: on failure the ``temporaries`` (files or folders) are removed, and a
    full disk or a read-only folder becomes a ``WriteError`` naming ``path``."""
    try:
        yield
    except BaseException as caught:
        err = caught
        for temporary in temporaries:
            remove_quietly(temporary)
        if isinstance(err, OSError) and err.filename and Path(err.filename) in temporaries:
            err = OSError(err.errno, err.strerror, str(path))   # the file it stood in for
        converted = write_error(err, path) if isinstance(err, Exception) else None
        if converted is None or converted is caught:
            raise
        raise converted from caught


def remove_quietly(path: Path) -> None:
    """Remove a file or folder if it is there, ignoring errors (a cleanup on the way out of a failure)."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def default_recovery(path: Path | str, stage: str | None = None) -> str:
    """Advice that works as printed, in the folder the stage ran in, without knowing the pipeline's files
    (the CLI replaces it with commands for the producing stage, ``dssl.pipeline.dvcfile.recovery_command``)."""
    return (f"Restore the recorded version with `dvc checkout --force {path}` or rebuild it with `dvc repro` "
            f"(it re-runs the stage{f' {stage}' if stage else ''} whose output changed).")


def _error(path: Path | str, problem: str, recovery: str | None) -> ArtifactError:
    return ArtifactError(path, problem, recovery=recovery)


def require_file(path: Path | str, recovery: str | None = None) -> Path:
    """``path`` as a Path; an ``ArtifactError`` when there is no such file."""
    path = Path(path)
    if not path.exists():
        raise _error(path, "the file does not exist", recovery)
    if not path.is_file():
        raise _error(path, "expected a file, found a folder or special file", recovery)
    return path


# --- type checks of parsed content ----------------------------------------------------------------


def _accepted(expected: TypeSpec) -> tuple[type, ...]:
    types = expected if isinstance(expected, tuple) else (expected,)
    return (*types, int) if float in types else types  # JSON writes 2.0 as 2.0, but a hand edit as 2


def _type_name(expected: TypeSpec) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
             bool: "true/false", type(None): "null"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _matches(value: Any, expected: TypeSpec) -> bool:
    types = _accepted(expected)
    if isinstance(value, bool) and bool not in types:
        return False  # bool is an int subclass, but true is not a count
    return isinstance(value, types)


def check_keys(path: Path | str, record: Any, required: Mapping[str, TypeSpec] | Iterable[str],
               what: str = "key", recovery: str | None = None) -> None:
    """Every ``required`` key present in the dict ``record`` (with the given type, for a mapping)."""
    if not isinstance(record, dict):
        raise _error(path, f"expected a mapping at the top level, got {type(record).__name__}", recovery)
    keys = list(required)
    missing = [key for key in keys if key not in record]
    if missing:
        raise _error(path, f"missing {what} {missing[0]!r} (all missing: {missing})", recovery)
    if isinstance(required, Mapping):
        for key, expected in required.items():
            if not _matches(record[key], expected):
                raise _error(path, f"{what} {key!r} should be {_type_name(expected)}, "
                                   f"got {type(record[key]).__name__}", recovery)


# --- readers ---------------------------------------------------------------------------------------


def read_json(path: Path | str, required: Mapping[str, TypeSpec] | Iterable[str] | None = None,
              recovery: str | None = None) -> Any:
    """Parse a JSON artifact; with ``required``, it must be an object holding those keys (and types)."""
    path = require_file(path, recovery)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise _error(path, f"is not UTF-8 text ({err.reason} at byte {err.start})", recovery) from err
    except json.JSONDecodeError as err:
        raise _error(path, f"not valid JSON, truncated or edited? ({err})", recovery) from err
    except OSError as err:
        raise _error(path, f"cannot be read ({err.strerror or err})", recovery) from err
    if required is not None:
        if not isinstance(record, dict):
            raise _error(path, f"expected a JSON object, got {type(record).__name__}", recovery)
        check_keys(path, record, required, recovery=recovery)
    return record


def load_npz(path: Path | str, required_arrays: Iterable[str] = (),
             recovery: str | None = None) -> dict[str, np.ndarray]:
    """All arrays of an ``.npz`` (no pickles), read in full so a truncated member fails here."""
    path = require_file(path, recovery)
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError, KeyError) as err:
        raise _error(path, f"not a readable .npz archive, truncated or damaged? "
                           f"({type(err).__name__}: {err})", recovery) from err
    missing = [name for name in required_arrays if name not in arrays]
    if missing:
        raise _error(path, f"has no array {missing[0]!r} (holds: {sorted(arrays) or 'nothing'})", recovery)
    return arrays


def load_torch(path: Path | str, map_location: Any = "cpu",
               required: Mapping[str, TypeSpec] | Iterable[str] | None = None,
               recovery: str | None = None) -> Any:
    """``torch.load(path, weights_only=True)``: tensors and plain Python values only, never code.

    ``required`` keys are checked when the file holds a dict (a state dict or a checkpoint).
    """
    import torch  # costs seconds to import; most readers never need it

    path = require_file(path, recovery)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        if "Unsupported global" in str(err):
            raise _error(path, f"holds objects a weights-only load refuses, only tensors and plain values "
                               f"are allowed ({_torch_reason(err)})", recovery) from err
        raise _error(path, f"cannot be loaded as a torch file, truncated or damaged? "
                           f"(UnpicklingError: {_torch_reason(err)})", recovery) from err
    except (RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile, KeyError, AttributeError,
            TypeError) as err:
        raise _error(path, f"cannot be loaded as a torch file, truncated or damaged? "
                           f"({type(err).__name__}: {_torch_reason(err)})", recovery) from err
    if required is not None:
        check_keys(path, payload, required, recovery=recovery)
    return payload


def _torch_reason(err: Exception) -> str:
    """The informative part of torch's long loading errors (its first sentence, or the refused global)."""
    text = str(err)
    for line in text.splitlines():
        if "Unsupported global" in line or "Unsupported operand" in line:
            return line.strip().removeprefix("WeightsUnpickler error: ").split(" was not an allowed")[0]
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    return first.split(". ")[0].rstrip(".")


# --- bit-stable floats -----------------------------------------------------------------------------


def stable_float(value: float, digits: int = SIGNIFICANT_DIGITS, decimals: int = ABSOLUTE_DECIMALS) -> float:
    """``value`` rounded to ``decimals`` places, then to ``digits`` significant digits; -0.0 -> 0.0.

    Python's decimal rounding is exact (correctly rounded decimal conversion), so equal inputs give
    equal outputs on every platform, and inputs that differ in the last bits give equal outputs
    unless they straddle a rounding boundary. Non-finite values are returned unchanged.
    """
    value = float(value)
    if not math.isfinite(value):
        return value
    value = float(f"{round(value, decimals):.{digits}g}")
    return value + 0.0


def stable_floats(obj: Any, digits: int = SIGNIFICANT_DIGITS, decimals: int = ABSOLUTE_DECIMALS) -> Any:
    """``stable_float`` on every float in nested dicts, lists, tuples and numpy arrays (as lists)."""
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, dict):
        return {key: stable_floats(value, digits, decimals) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [stable_floats(value, digits, decimals) for value in obj]
    if isinstance(obj, (float, np.floating)):
        return stable_float(obj, digits, decimals)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj

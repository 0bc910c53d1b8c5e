"""The dvc.lock files as the record of what produced what, and the workspace compared against it.

A dvc.lock lies beside each dvc.yaml of a pipeline folder (the top-level one and ``pipelines/<kind>/``;
the project for params.yaml, ``runs/<profile>/`` for another params file, every path relative to that
folder); together they hold, per stage that ran, the command, the params file and the VALUES it read and
the md5 of every dependency and output (a folder as DVC's ``<md5>.dir``: the md5 of the JSON list of its
files' ``{"md5", "relpath"}`` sorted by path; the list itself lies in the DVC cache). Walking from an
output to the stage that wrote it, and from that stage's dependencies to their producers, gives a
number's whole lineage without running DVC. Hashes are recomputed here exactly as DVC computes them, so
"matches dvc.lock" means what ``dvc status`` would say about that path.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dssl.tracking.lineage import file_md5
from dssl.yamlio import load_yaml

LOCK_FILE = "dvc.lock"
DIR_SUFFIX = ".dir"
CACHE_DIR = Path(".dvc/cache/files/md5")


class LineageError(Exception):
    """A lineage question that cannot be answered: a missing file, an unknown cell, no dvc.lock."""


@dataclass(frozen=True)
class LockedPath:
    """A dependency or output of a locked stage, with the md5 dvc.lock recorded for it."""

    path: str
    md5: str | None

    @property
    def is_folder(self) -> bool:
        return bool(self.md5 and self.md5.endswith(DIR_SUFFIX))


@dataclass(frozen=True)
class LockedStage:
    name: str
    cmd: str
    params: dict[str, Any]          # params key -> value, as the stage read them
    deps: tuple[LockedPath, ...]
    outs: tuple[LockedPath, ...]
    params_files: tuple[str, ...] = ()  # the params files it read, relative to the pipeline folder

    def writes(self, path: str) -> LockedPath | None:
        """The output that is ``path`` or the folder holding it."""
        return next((o for o in self.outs if path == o.path or path.startswith(o.path + "/")), None)


def lock_files(root: Path) -> list[Path]:
    """The lock file of every dvc.yaml of the project that has one (top level first)."""
    root = Path(root)
    files = [root / LOCK_FILE, *sorted(p.parent / LOCK_FILE for p in root.glob("pipelines/**/dvc.yaml"))]
    return [path for path in files if path.is_file()]


def read_lock(root: Path) -> dict[str, LockedStage]:
    """Every stage the lock files record, by name."""
    paths = lock_files(root)
    if not paths:
        raise LineageError(f"{Path(root) / LOCK_FILE}: no dvc.lock, so nothing records what produced the results. "
                           f"Run `cd {root} && dvc repro` (or `dvc commit -f -R {root}` after Snakemake) first.")
    stages: dict[str, LockedStage] = {}
    for path in paths:
        try:
            lock = load_yaml(path.read_text()) or {}
        except yaml.YAMLError as err:
            raise LineageError(f"{path}: not valid YAML ({err}); restore it with `git checkout {path}`") from err
        stages.update({name: _stage(name, entry) for name, entry in (lock.get("stages") or {}).items()})
    return stages


def _stage(name: str, entry: dict) -> LockedStage:
    params = {key: value for values in (entry.get("params") or {}).values() for key, value in values.items()}
    return LockedStage(name, entry.get("cmd", ""), params,
                       tuple(LockedPath(d["path"], d.get("md5")) for d in entry.get("deps") or []),
                       tuple(LockedPath(o["path"], o.get("md5")) for o in entry.get("outs") or []),
                       tuple(entry.get("params") or {}))


def params_file(stages: dict[str, LockedStage]) -> str:
    """The params file the locked stages read (relative to their pipeline folder): params.yaml, or the
    file a pipeline folder runs/<profile>/ was rendered for."""
    files = sorted({f for stage in stages.values() for f in stage.params_files})
    if len(files) > 1:
        raise LineageError(f"the dvc.lock files name several params files ({', '.join(files)}); "
                           "one pipeline folder records one params file: re-run `dssl dag write` and record again")
    return files[0] if files else "params.yaml"


def dvc_repository(folder: Path) -> Path:
    """The DVC repository (the folder holding .dvc/) a pipeline folder belongs to."""
    here = Path(folder).resolve()
    return next((f for f in (here, *here.parents) if (f / ".dvc").is_dir()), here)


def producer(stages: dict[str, LockedStage], path: str) -> LockedStage | None:
    """The locked stage whose output is ``path`` or holds it."""
    return next((stage for stage in stages.values() if stage.writes(path)), None)


def producers(stages: dict[str, LockedStage], dep: str) -> list[LockedStage]:
    """The stages a dependency comes from: the one writing it, or those writing into a folder dep."""
    found = producer(stages, dep)
    if found is not None:
        return [found]
    return [s for s in stages.values() if any(o.path.startswith(dep + "/") for o in s.outs)]


def folder_md5(folder: Path) -> str:
    """DVC's hash of a folder: md5 of the sorted JSON list of its files' md5 and relative path."""
    entries = sorted(({"md5": md5, "relpath": rel} for rel, md5 in folder_files(folder).items()),
                     key=lambda entry: entry["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode()).hexdigest() + DIR_SUFFIX


def folder_files(folder: Path) -> dict[str, str]:
    """Relative path -> md5 of every file under ``folder``."""
    return {p.relative_to(folder).as_posix(): file_md5(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def current_md5(root: Path, path: str) -> str | None:
    """md5 of the path now, as DVC would record it; None when it does not exist."""
    target = Path(root) / path
    if target.is_file():
        return file_md5(target)
    if target.is_dir():
        return folder_md5(target)
    return None


def locked_files(root: Path, entry: LockedPath) -> dict[str, str] | None:
    """Relative path -> md5 of a locked folder's files, from the DVC cache (None: not in the cache)."""
    if not entry.is_folder:
        return None
    digest = entry.md5.removesuffix(DIR_SUFFIX)
    listing = dvc_repository(root) / CACHE_DIR / digest[:2] / (digest[2:] + DIR_SUFFIX)
    if not listing.is_file():
        return None
    return {item["relpath"]: item["md5"] for item in json.loads(listing.read_text())}

"""md5s of a run's inputs for its lineage tags, taken from where they were computed already.

Hashing every input folder in full for every MLflow run cost as much as reading the data again: an
ImageNet evaluation stage reads ~187 GiB of prepared arrays, once per seed and protocol. The md5s exist
already, so they are reused, in this order:

1. ``dvc.lock``, when the stage runs under DVC (``DVC_STAGE`` is set): the output entry of the stage
   that wrote the path (DVC hashed it when that stage finished, and re-checks it before this one runs;
   a folder's md5 is DVC's ``<md5>.dir``). Outside DVC a lock file may be older than the workspace,
   so it is not used.
2. A prepared image folder's ``meta.json`` (``dssl.data.prepared_array``): it lists the md5 of every
   block of the decoded arrays and of the index, and those blocks are verified against it before a
   batch is read; the md5 of ``meta.json`` therefore stands for the whole folder.
3. Otherwise the path is hashed (``content_hash``), once per process for a file or folder that has
   not changed since (same sizes and modification times): small inputs (a partition, a graph, one
   encoder's weights) and array datasets, which have no recorded md5.

Each tag ``input.<path>`` has a companion ``input_source.<path>`` saying which of the three it came from.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import yaml

from dssl.tracking.lineage import content_hash, file_md5
from dssl.yamlio import load_yaml

DVC_LOCK = "dvc.lock"
HASHED = "hashed"
PREPARED_META = "prepare meta.json (block md5s, verified before use)"

_hashed: dict[tuple, str] = {}   # (path, stat signature) -> md5, for this process


def input_md5s(root: Path, paths: list[Path], lock: bool | None = None) -> dict[str, tuple[str, str]]:
    """``{path: (md5, source)}`` for each input path (relative to ``root``). ``lock``: use dvc.lock's
    md5s (default: when DVC runs the stage); False gives the same md5 under every engine."""
    use_lock = bool(os.environ.get("DVC_STAGE")) if lock is None else lock
    keys = [Path(path).as_posix() for path in paths]
    locked = _lock_outputs(root, set(keys)) if use_lock else {}
    found = {}
    for path, key in zip(paths, keys):
        if key in locked:
            found[key] = locked[key]
        elif (meta := _prepared_meta(Path(root) / path)) is not None:
            found[key] = (file_md5(meta), PREPARED_META)
        else:
            found[key] = (_hash_once(Path(root) / path), HASHED)
    return found


def _lock_outputs(root: Path, wanted: set[str]) -> dict[str, tuple[str, str]]:
    """The output paths the project's lock files record, with their md5s and the stages that wrote them,
    read file by file until every ``wanted`` path is found (each stage reads the lock files afresh)."""
    outputs: dict[str, tuple[str, str]] = {}
    for lock in [Path(root) / DVC_LOCK, *sorted(Path(root).glob(f"pipelines/**/{DVC_LOCK}"))]:
        if wanted <= outputs.keys():
            break
        if not lock.is_file():
            continue
        try:
            stages = (load_yaml(lock.read_text()) or {}).get("stages") or {}
        except yaml.YAMLError:
            continue
        for name, entry in stages.items():
            for out in (entry or {}).get("outs") or []:
                if out.get("md5"):
                    outputs[str(out["path"])] = (str(out["md5"]), f"dvc.lock ({name})")
    return outputs


def _prepared_meta(folder: Path) -> Path | None:
    """A prepared image folder's meta.json when it records block md5s for every split."""
    meta = folder / "meta.json"
    if not folder.is_dir() or not meta.is_file():
        return None
    try:
        arrays = json.loads(meta.read_text()).get("arrays")
    except (OSError, ValueError):
        return None
    if not isinstance(arrays, dict) or not arrays:
        return None
    recorded = all(isinstance(entry, dict) and entry.get("chunk_md5") and entry.get("index_md5")
                   for entry in arrays.values())
    return meta if recorded else None


def _hash_once(path: Path) -> str:
    signature = _signature(path)
    if signature not in _hashed:
        _hashed[signature] = content_hash(path)
    return _hashed[signature]


def _signature(path: Path) -> tuple:
    """The path with the size and modification time of each of its files: a changed file re-hashes."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    digest = hashlib.md5()
    for file in files:
        stat = file.stat()
        digest.update(f"{file}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return (str(path.resolve()), digest.hexdigest())

"""Verdict records: a finished run's claims kept with what ran them, for another build's report.

``dssl verdicts export --label <name>`` copies the report's ``claims.csv`` to
``reports/verdicts/<name>/`` with ``source.json``: the md5 of the params file, a digest of the code (the
``code`` stage's manifests: every file of every stage's code), the hardware the results
were computed on and the kernel pins they ran under (both from their result files' ``hardware``, which
each stage writes: not from the exporting shell's environment) and the git commit. A params file's
``report.verdicts_elsewhere`` (label -> such a folder) puts them in its report (``reporting.verdicts``):
recorded with the same params md5 and code digest, they mark the claims whose verdict differs as fragile.
The typical use: the same commit run once more with torch's and oneDNN's kernels pinned to another
instruction set (``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2``: on an AVX512 AMD EPYC this gives
an AVX2 EPYC's bits; ``MKL_CBWR=AVX2`` would also switch MKL to its reproducibility-mode code, which no
unpinned run executes). ``MKL_CBWR`` is recorded when set. A run whose result files ran under different
pins is refused: its record would name kernels that did not compute all of it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import Mapping

from dssl.artifacts import ArtifactError, read_json
from dssl.pipeline.common import StageError, atomic_dir
from dssl.pipeline.layout import METRICS
from dssl.tracking.lineage import label_pins
from dssl.yamlio import load_yaml

VERDICTS = Path("reports/verdicts")
CLAIMS = Path("reports/sections/claims.csv")
CODE_MANIFESTS = Path("reports/lineage/code")
RECOVERY = "record it again: `dssl verdicts export --label <name>` after a finished run"


def code_digest(root: Path) -> str:
    """md5 over every code manifest's (kind, file, digest) rows: equal exactly when the code of every stage
    is (the manifests of stage kinds and of the components the cells run, ``pipeline/code.py``)."""
    folder = root / CODE_MANIFESTS
    manifests = sorted(folder.rglob("*.json")) if folder.is_dir() else []
    if not manifests:
        raise ArtifactError(folder, "no code manifests; run the pipeline (its code stage writes them) first")
    rows = []
    for path in manifests:
        manifest = read_json(path, ("kind", "files"))
        rows += [f"{manifest['kind']} {name} {md5}" for name, md5 in sorted(manifest["files"].items())]
    return hashlib.md5("\n".join(rows).encode()).hexdigest()


def params_digest(path: Path) -> str:
    """md5 of a params file's values without ``report.verdicts_elsewhere``: listing a record in the build
    that reads it must not make that build's params differ from the record's (comments and key order
    do not count either)."""
    import yaml

    try:
        params = load_yaml(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ArtifactError(path, f"unreadable params file ({err})") from err
    report = params.get("report")
    if isinstance(report, dict):
        params["report"] = {key: value for key, value in report.items() if key != "verdicts_elsewhere"}
        if not params["report"]:
            del params["report"]
    return hashlib.md5(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()


def _labels(root: Path) -> dict[Path, str]:
    """Each result file of the run (relative to ``root``) with its ``hardware`` label, if it has one."""
    labels = {path.relative_to(root): json.loads(path.read_text()).get("hardware")
              for path in sorted((root / METRICS).rglob("*.json"))}
    return {path: label for path, label in labels.items() if label}


def _hardware(root: Path) -> list[str]:
    """The distinct ``hardware`` labels of the run's result files."""
    return sorted(set(_labels(root).values()))


def _kernel_pins(root: Path, params_path: Path, hardware: list[str]) -> dict[str, str]:
    """The kernel pins every result file ran under (``hardware`` labels); a mix of pins is refused, with
    the command that reruns the stages of the fewer files under the pins of the others."""
    pins = {json.dumps(label_pins(label), sort_keys=True) for label in hardware}
    if len(pins) > 1:
        raise StageError(f"the result files ran under different kernel pins ({'; '.join(hardware)}): rerun the "
                         f"stages of the other setting with the pins of the run to record "
                         f"({_rerun_advice(root, params_path)}), then export")
    return json.loads(pins.pop()) if pins else {}


def _rerun_advice(root: Path, params_path: Path) -> str:
    """``dvc repro -s -f`` of the stages whose result files ran under other pins than most, in an
    environment with most files' pins (``env -u`` drops a pin those files did not have); the files
    themselves where the params file names no stage that writes them."""
    from dssl.config.checker import ParamsError
    from dssl.config.params import read_params
    from dssl.pipeline.catalogue import producer
    from dssl.pipeline.dvcfile import recovery_command

    groups: dict[str, list[Path]] = {}
    for path, label in _labels(root).items():
        groups.setdefault(json.dumps(label_pins(label), sort_keys=True), []).append(path)
    keep = max(groups, key=lambda key: len(groups[key]))
    others = [path for key, paths in groups.items() if key != keep for path in paths]
    try:
        params = read_params(root / params_path)
        stages = [producer(params, path) for path in others]
    except (OSError, KeyError, TypeError, ValueError, ParamsError):   # a params file without those stages
        stages = [None]
    if None in stages:
        return f"the stages that wrote {', '.join(path.as_posix() for path in others)}"
    wanted = json.loads(keep)
    unset = sorted({name for key in groups for name in json.loads(key)} - set(wanted))
    environment = [*(f"-u {name}" for name in unset), *(f"{name}={value}" for name, value in sorted(wanted.items()))]
    targets = sorted({recovery_command(stage).removeprefix("dvc repro -s -f ") for stage in stages})
    return f"`{' '.join([*(['env', *environment] if environment else []), 'dvc repro -s -f', *targets])}`"


def _commit(root: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None if done.returncode == 0 else None


def source(root: Path, params_path: Path) -> dict:
    """What a run's verdicts depend on: its params and code, hardware and kernel pins."""
    hardware = _hardware(root)
    return {"params_digest": params_digest(root / params_path), "code_digest": code_digest(root),
            "hardware": hardware, "kernels": _kernel_pins(root, params_path, hardware),
            "commit": _commit(root), "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def export(root: Path, params_path: Path, label: str) -> Path:
    """Write ``reports/verdicts/<label>/`` (claims.csv and source.json) from the run in ``root``."""
    claims = root / CLAIMS
    if not claims.is_file():
        raise ArtifactError(claims, "no claims of a finished run; run the pipeline to its report first")
    if not label or "/" in label or label.startswith("."):
        raise StageError(f"--label {label!r}: give a plain name for where the run ran, e.g. avx2-kernels")
    out = root / VERDICTS / label
    with atomic_dir(out) as tmp:
        (tmp / "claims.csv").write_bytes(claims.read_bytes())
        (tmp / "source.json").write_text(json.dumps(source(root, params_path), indent=1, sort_keys=True) + "\n")
    return out


def load_records(root: Path, params_path: Path, entries: Mapping[str, str]):
    """The verdict records a params file lists (label -> folder), each marked comparable when it ran
    this build's params file and code."""
    import pandas as pd

    from dssl.reporting.verdicts import VerdictRecord

    here = {"params_digest": params_digest(root / params_path), "code_digest": code_digest(root)}
    records = []
    for label, folder in entries.items():
        folder = root / folder
        recorded = read_json(folder / "source.json", ("params_digest", "code_digest"), recovery=RECOVERY)
        try:
            claims = pd.read_csv(folder / "claims.csv", keep_default_na=False)
        except (OSError, pd.errors.ParserError) as err:
            raise ArtifactError(folder / "claims.csv", f"unreadable ({err})", recovery=RECOVERY) from err
        missing = {"section", "claim", "cells", "verdict"} - set(claims.columns)
        if missing:
            raise ArtifactError(folder / "claims.csv", f"lacks the columns {sorted(missing)}", recovery=RECOVERY)
        comparable = all(recorded[key] == here[key] for key in here)
        records.append(VerdictRecord(label, recorded, claims, comparable))
    return records

"""The lineage of one result: every stage behind it, from dvc.lock and the MLflow store, checked
against the workspace.

A result file (``reports/metrics/<framework>/<cell>/seed-<s>/<dataset>-<protocol>.json``) names its
stage, and its MLflow run is the one of that stage with the result's run name
(``tracking.names.result_run_name``); of several (a stage re-run with other params), the one whose
``output.<path>`` tag holds the file's md5 now, else the latest. From the stage that wrote it, dvc.lock
leads through each dependency to the stage that produced it (pretraining -> partitions / graphs ->
prepared dataset, and the code manifests), with the params values each stage read and the md5 of each
path. Each upstream stage's MLflow run is the one of that stage (and seed, where the stage runs one per
seed) that started last before the evaluation run: stages run in dependency order, so that is the run
whose outputs the evaluation read.
Folders holding one sub-folder per seed are narrowed to the result's seed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dssl.lineage.lock import (
    LineageError,
    LockedPath,
    LockedStage,
    current_md5,
    folder_files,
    locked_files,
    params_file,
    producer,
    producers,
    read_lock,
)
from dssl.tracking.names import output_tag, result_run_name
from dssl.yamlio import load_yaml

MATCHES, CHANGED, MISSING, UNRECORDED = "matches", "changed", "missing", "not in the DVC cache"
RUN_TAGS = ("git_commit", "git_dirty", "params_hash", "engine", "dvc_stage", "profile", "seed",
            "hardware.cpu", "hardware.cpu_capability", "hardware.kernel_pins", "hardware.torch",
            "hardware.accelerator")
ROLES = {"evaluate": "evaluation", "pretrain": "pretraining", "partitions": "partitions", "graphs": "graphs",
         "graph_improve": "graph", "prepare": "prepared dataset", "code": "code manifests", "theory": "theory"}


@dataclass
class PathCheck:
    """A path of the lineage: the md5 dvc.lock recorded and the md5 now."""

    path: str
    md5_lock: str | None
    md5_now: str | None

    @property
    def status(self) -> str:
        if self.md5_now is None:
            return MISSING
        if self.md5_lock is None:
            return UNRECORDED
        return MATCHES if self.md5_now == self.md5_lock else CHANGED

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


@dataclass
class RunInfo:
    """A stage's MLflow run: id, params and metrics as logged, lineage tags."""

    id: str
    name: str
    start_time: int
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    inputs: dict[str, str]           # input.<path> tags: md5 of each input the stage read
    matched_by: str


@dataclass
class StageLineage:
    name: str
    role: str
    cmd: str
    params: dict[str, Any]                       # as dvc.lock recorded them
    params_changed: list[str]                    # keys whose value in the params file differs now
    deps: list[PathCheck]
    outs: list[PathCheck]                        # the outputs this lineage uses
    files: list[PathCheck] = field(default_factory=list)  # the files of folder outputs (this seed)
    run: RunInfo | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("deps", "outs", "files"):
            data[key] = [check.as_dict() for check in getattr(self, key)]
        return data


@dataclass
class ResultLineage:
    file: str
    result: dict[str, Any]           # framework, model, dataset, protocol, seed, test_acc, stage, run name
    stages: list[StageLineage]

    @property
    def mismatches(self) -> list[str]:
        """Every way the workspace differs from dvc.lock along this lineage."""
        found = []
        for stage in self.stages:
            found += [f"{stage.name}: {c.path} {c.status}" for c in (*stage.deps, *stage.outs, *stage.files)
                      if c.status in (CHANGED, MISSING)]
            found += [f"{stage.name}: params {key} changed" for key in stage.params_changed]
        return found

    @property
    def matches_lock(self) -> bool:
        return not self.mismatches

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "result": self.result, "matches_lock": self.matches_lock,
                "mismatches": self.mismatches, "stages": [s.as_dict() for s in self.stages]}


# --------------------------------------------------------------------------------------- tracing


def trace_result(root: Path, result_file: str | Path, lock: dict[str, LockedStage] | None = None,
                 runs: "RunIndex | None" = None) -> ResultLineage:
    """The lineage of one result file (a path relative to ``root`` or absolute inside it)."""
    root = Path(root).resolve()
    relative = _relative(root, result_file)
    record = _read_result(root / relative)
    lock = read_lock(root) if lock is None else lock
    evaluation = producer(lock, relative)
    if evaluation is None:
        raise LineageError(f"{relative}: no stage in dvc.lock writes this file; is it a result of this project? "
                           "Run `dvc repro` (or `dvc commit -f` after Snakemake) to record it.")
    seed = record.get("seed")
    runs = RunIndex(root) if runs is None else runs
    name = result_run_name(record)
    eval_run = runs.by_name(record["stage"], name, relative, current_md5(root, relative))
    current = _current_params(root / params_file(lock))
    stages = [_stage_lineage(root, evaluation, [relative], seed, current, eval_run)]
    for stage, used in _ancestors(lock, evaluation):
        run = runs.latest_before(stage.name, seed, eval_run.start_time if eval_run else None, used)
        stages.append(_stage_lineage(root, stage, used, seed, current, run))
    summary = {key: record.get(key) for key in ("framework", "model", "partition", "graph", "dataset",
                                                  "protocol", "seed", "test_acc", "stage")}
    return ResultLineage(relative, {**summary, "run_name": name}, stages)


def _relative(root: Path, path: str | Path) -> str:
    path = Path(path)
    absolute = path if path.is_absolute() else Path.cwd() / path
    if not absolute.exists() and not path.is_absolute():
        absolute = root / path
    try:
        return absolute.resolve().relative_to(root).as_posix()
    except ValueError as err:
        raise LineageError(f"{path}: not inside the project {root}") from err


def _read_result(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise LineageError(f"{path}: no such result file. Results lie under reports/metrics/<framework>/<cell>/"
                           "seed-<s>/<dataset>-<protocol>.json; `dvc checkout` restores recorded ones.")
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise LineageError(f"{path}: not a JSON result file ({err})") from err
    missing = [key for key in ("stage", "seed", "dataset", "protocol") if key not in record] \
        if isinstance(record, dict) else ["stage"]
    if missing:
        raise LineageError(f"{path}: not an evaluation result (no {', '.join(repr(k) for k in missing)} key)")
    return record


def _ancestors(lock: dict[str, LockedStage], start: LockedStage) -> list[tuple[LockedStage, list[str]]]:
    """Every stage upstream of ``start``, nearest first, with the paths of it the lineage reads."""
    order: list[str] = []
    used: dict[str, list[str]] = {}
    frontier = [start]
    while frontier:
        stage = frontier.pop(0)
        for dep in stage.deps:
            for upstream in producers(lock, dep.path):
                paths = [dep.path] if upstream.writes(dep.path) else \
                    [o.path for o in upstream.outs if o.path.startswith(dep.path + "/")]
                if upstream.name not in used:
                    order.append(upstream.name)
                    used[upstream.name] = []
                    frontier.append(upstream)
                used[upstream.name] += [p for p in paths if p not in used[upstream.name]]
    return [(lock[name], used[name]) for name in order]


def _stage_lineage(root: Path, stage: LockedStage, used: list[str], seed: int | None,
                   current: dict[str, Any], run: RunInfo | None) -> StageLineage:
    outs = [o for o in stage.outs if any(p == o.path or p.startswith(o.path + "/") for p in used)]
    deps = [_check(root, d) for d in stage.deps]
    out_checks = [_check(root, o) for o in outs]
    # Files of the outputs only: a dependency's files are listed under the stage that wrote them.
    files = [f for entry in outs for f in _file_checks(root, entry, seed, used)]
    changed = [key for key, value in stage.params.items() if _lookup(current, key) != value]
    kind = stage.name.split("@")[0]
    role = ROLES.get(kind) or ROLES.get(kind.split("_")[0], kind)
    return StageLineage(stage.name, role, stage.cmd, stage.params, changed, deps, out_checks, files, run)


def _check(root: Path, entry: LockedPath) -> PathCheck:
    return PathCheck(entry.path, entry.md5, current_md5(root, entry.path))


def _file_checks(root: Path, entry: LockedPath, seed: int | None, used: list[str]) -> list[PathCheck]:
    """Each file of a folder entry (only the seed's sub-folder when it has one per seed)."""
    if not entry.is_folder:
        return []
    folder = root / entry.path
    now = folder_files(folder) if folder.is_dir() else {}
    recorded = locked_files(root, entry)
    names = sorted(set(now) | set(recorded or {}))
    seed_prefix = f"seed-{seed}/"
    if seed is not None and any(n.startswith(seed_prefix) for n in names):
        names = [n for n in names if n.startswith(seed_prefix)]
    inside = [p for p in used if p.startswith(entry.path + "/")]
    if inside:  # a single result file of an output folder: that file only
        names = [n for n in names if f"{entry.path}/{n}" in inside]
    return [PathCheck(f"{entry.path}/{n}", (recorded or {}).get(n), now.get(n)) for n in names]


def _current_params(path: Path) -> dict[str, Any]:
    return load_yaml(path.read_text()) or {} if path.is_file() else {}


def _lookup(params: dict[str, Any], dotted: str) -> Any:
    value: Any = params
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


# ------------------------------------------------------------------------------------------ MLflow


class RunIndex:
    """The runs of the project's MLflow store, read once (MLflow is imported only here).

    A store that cannot be read (a damaged SQLite file, a server that fails) leaves the lock part of the
    lineage intact: every run is then reported as not found and ``problem`` says why, once."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._runs: list | None = None
        self._client = None
        self.problem: str | None = None

    def _unreadable(self, err: Exception) -> None:
        from dssl.tracking.mlflow_store import tracking_uri

        first = next((line for line in str(err).splitlines() if line.strip()), "")
        reason = f"{type(err).__name__}: {first}"
        self.problem = self.problem or f"tracking store {tracking_uri(self.root)} unreadable ({reason})"
        self._runs = []

    @property
    def client(self):
        if self._client is None:
            import logging

            import mlflow

            from dssl.tracking.mlflow_store import tracking_uri

            logging.getLogger("mlflow").setLevel(logging.WARNING)
            self._client = mlflow.MlflowClient(tracking_uri=tracking_uri(self.root))
        return self._client

    def by_name(self, stage: str, name: str, output: str, md5: str | None) -> RunInfo | None:
        """The run of ``stage`` named ``name`` (``tracking.names``): of several (the stage re-run with other
        params or code), the one whose tag says it wrote ``output`` with ``md5``, else the latest."""
        named = [r for r in self._all() if r.data.tags.get("stage") == stage and r.info.run_name == name]
        wrote = [r for r in named if md5 is not None and r.data.tags.get(output_tag(output)) == md5]
        if not (wrote or named):
            return None
        run = max(wrote or named, key=lambda r: r.info.start_time)
        how = "stage and run name" + (", and the result file's md5" if wrote else
                                      (" (the latest: none holds the result file's md5)" if len(named) > 1 else ""))
        return _run_info(run, how)

    def latest_before(self, stage: str, seed: int | None, before: int | None,
                      used: list[str] = ()) -> RunInfo | None:
        """The run of ``stage`` started last before ``before``: of ``seed`` when the stage logs one run per
        seed, and of the entry the lineage uses when it logs one per entry (``partitions/<name>``)."""
        candidates = [r for r in self._all() if r.data.tags.get("stage") == stage]
        if any("seed" in r.data.tags for r in candidates) and seed is not None:
            candidates = [r for r in candidates if r.data.tags.get("seed") == str(seed)]
        components = {part for path in used for part in path.split("/")}
        named = [r for r in candidates if (r.info.run_name or "").startswith(stage + "/")
                 and r.info.run_name.removeprefix(stage + "/") in components]
        candidates = named or candidates
        if before is not None:
            candidates = [r for r in candidates if r.info.start_time <= before]
        if not candidates:
            return None
        latest = max(candidates, key=lambda r: r.info.start_time)
        how = "stage" + (", seed" if "seed" in latest.data.tags else "") + (", entry" if named else "") \
            + " and the last start before the evaluation run"
        return _run_info(latest, how)

    def _store_exists(self) -> bool:
        from dssl.tracking.mlflow_store import tracking_uri

        uri = tracking_uri(self.root)  # a SQLite store that does not exist would be created by MLflow
        return not uri.startswith("sqlite:///") or Path(uri.removeprefix("sqlite:///")).is_file()

    def _all(self) -> list:
        if self._runs is None:
            self._runs = []
            if self._store_exists():
                try:
                    experiments = self.client.search_experiments()
                    ids = [e.experiment_id for e in experiments]
                    self._runs = list(self.client.search_runs(ids, max_results=50000)) if ids else []
                except Exception as err:  # noqa: BLE001 - SQLAlchemy's, MLflow's or the server's error
                    self._unreadable(err)
        return self._runs


def _run_info(run, matched_by: str) -> RunInfo:
    tags = run.data.tags
    return RunInfo(run.info.run_id, run.info.run_name, run.info.start_time, dict(run.data.params),
                   dict(run.data.metrics), {k: tags[k] for k in RUN_TAGS if k in tags},
                   {k.removeprefix("input."): v for k, v in tags.items() if k.startswith("input.")}, matched_by)

"""``dssl lineage`` as plain text: one block per seed, one paragraph per stage, nearest stage first."""

from __future__ import annotations

import textwrap
from typing import Any

from dssl.lineage.audit import MATCHES, PathCheck, ResultLineage, RunInfo, StageLineage

WIDTH = 110


def render_text(answer: dict[str, Any]) -> str:
    lines: list[str] = []
    if answer.get("params_file"):
        lines += [f"params file {answer['params_file']}, pipeline folder {answer.get('pipeline', '.')}", ""]
    if answer.get("tracking_problem"):
        lines += [f"{answer['tracking_problem']}: no MLflow run is shown below", ""]
    if answer.get("cell"):
        cell = answer["cell"]
        lines += [f"Table cell {cell['row']!r} / {cell['dataset']} {cell['setting']} in {answer['table']}: "
                  f"mean {cell.get('mean')} (n={cell.get('n')})", ""]
    for result in answer["results"]:
        lines += _result(result, answer.get("params_file", "params.yaml")) + [""]
    verdict = all(r.matches_lock for r in answer["results"])
    lines.append("workspace matches dvc.lock" if verdict else "workspace does NOT match dvc.lock (see above)")
    return "\n".join(lines)


def _result(result: ResultLineage, params_file: str) -> list[str]:
    r = result.result
    lines = [f"== {result.file}", f"   seed {r['seed']}, {r['dataset']} {r['protocol']}: "
             f"test_acc {r['test_acc']} (stage {r['stage']}, MLflow run named {r['run_name']})"]
    for stage in result.stages:
        lines += _stage(stage, params_file)
    if result.mismatches:
        lines.append("   MISMATCH with dvc.lock:")
        lines += [f"     - {m}" for m in result.mismatches]
    else:
        lines.append("   every path and params value above matches dvc.lock")
    return lines


def _stage(stage: StageLineage, params_file: str) -> list[str]:
    lines = [f"-- {stage.role} stage {stage.name}", f"   cmd: {stage.cmd}"]
    for key, value in stage.params.items():
        changed = f"   (CHANGED in {params_file} since)" if key in stage.params_changed else ""
        lines += _wrap(f"   param {key} = {value}{changed}")
    lines += [f"   dep {_check(c)}" for c in stage.deps]
    lines += [f"   out {_check(c)}" for c in stage.outs]
    lines += [f"     file {_check(c)}" for c in stage.files]
    lines += _run(stage.run)
    return lines


def _check(check: PathCheck) -> str:
    state = check.status if check.status != MATCHES else "matches dvc.lock"
    if check.status == "changed":
        state = f"CHANGED, now {check.md5_now}"
    elif check.status == "missing":
        state = "MISSING now"
    return f"{check.path}  md5 {check.md5_lock}  [{state}]"


def _run(run: RunInfo | None) -> list[str]:
    if run is None:
        return ["   MLflow run: none found in the tracking store"]
    tags = ", ".join(f"{k} {v}" for k, v in run.tags.items())
    metrics = ", ".join(f"{k}={v:.6g}" for k, v in sorted(run.metrics.items()))
    params = ", ".join(f"{k}={v}" for k, v in sorted(run.params.items()))
    return [f"   MLflow run {run.id} ({run.name}; matched by {run.matched_by})",
            *_wrap(f"     tags: {tags}"), *_wrap(f"     metrics: {metrics}"), *_wrap(f"     params: {params}")]


def _wrap(text: str) -> list[str]:
    """Long values go on continuation lines, indented: nothing is cut off."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=" " * 9, break_on_hyphens=False) or [text]

"""Preemption on SLURM: one pretraining job and one evaluation job of the CI profile, each stopped in the
middle of its stage by the signal SLURM sends ahead of a job's time limit, checkpoint, requeue their own
job, start again and end with the same bits as the uninterrupted local run (``ci_local_run``).

The jobs are submitted by `snakemake --profile profiles/slurm-local`, as on a site: with `--requeue` and
`--signal=USR1@<seconds>`. That signal would come minutes before a time limit; the test sends it itself
once the stage is under way (`scancel --signal=USR1 <job>`, which SLURM delivers the same way: to every
process of the job's steps, Snakemake's own included), so the stop falls in the middle of the stage.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ci_runs import clean_env, results

from dssl.tracking import stage_runs

pytestmark = pytest.mark.slow

CELL = ("simsiam-cnn", "fl-iid", "fedavg")
PRETRAIN = ("pretrain_fl", "models/fl/simsiam-cnn/fl-iid/fedavg")
EVALUATE = ("evaluate_fl", "reports/metrics/fl/simsiam-cnn/fl-iid/fedavg")


def project_without(reference: Path, tmp_path: Path, kind: str, output: str) -> Path:
    """A copy of the finished local run without one stage's output and checkpoints: Snakemake has exactly
    that stage to run."""
    root = tmp_path / "project"
    shutil.copytree(reference, root, symlinks=True)
    shutil.rmtree(root / output)
    shutil.rmtree(root / "checkpoints" / f"{kind}@{'-'.join(CELL)}", ignore_errors=True)
    return root


def catches_usr1(pid: str) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught & (1 << (signal.SIGUSR1 - 1)))


def stage_ready(kind: str, root: Path) -> bool:
    """Whether the stage's own process (running in ``root``) has installed its stop handler: before that,
    a signal would be ignored, as Snakemake ignores it."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().decode(errors="replace").split("\0")
            if kind in words and all(a in words for a in CELL) and any(w.endswith("dssl") for w in words) \
                    and Path(os.readlink(cmdline.parent / "cwd")) == root.resolve() \
                    and catches_usr1(cmdline.parent.name):
                return True
        except (OSError, StopIteration):
            continue
    return False


def run_stopped_mid_stage(slurm, root: Path, kind: str, output: str) -> tuple[str, str]:
    """`snakemake --profile profiles/slurm-local <output>`, the job signalled once its stage is under way;
    returns the SLURM job id and Snakemake's log."""
    log_path = root.parent / "snakemake.log"
    with open(log_path, "w") as log:
        snakemake = subprocess.Popen(["snakemake", "--profile", "profiles/slurm-local", "--verbose", output],
                                     cwd=root, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 900
        while not stage_ready(kind, root):
            assert snakemake.poll() is None, (
                f"Snakemake ended before the stage started:\n{log_path.read_text()[-5000:]}")
            assert time.monotonic() < deadline, f"the stage never started:\n{slurm.log_tail()}"
            time.sleep(0.2)
        (job,) = [job for job, _, state in slurm.jobs() if state == "RUNNING"]
        subprocess.run(["scancel", "--signal=USR1", job], check=True)
        status = snakemake.wait(timeout=1800)
    finally:
        if snakemake.poll() is None:
            snakemake.kill()
    text = log_path.read_text()
    assert status == 0, f"{text[-6000:]}\n{slurm.log_tail()}"
    return job, text


def assert_requeued_once(slurm, job: str, log: str) -> None:
    assert [state for _, _, state in slurm.jobs()] == ["COMPLETED"]  # one job, which ended well
    assert slurm.job_field(job, "Restarts") == "1"                    # after one requeue
    assert "--requeue" in log and "--signal=USR1@" in log              # submitted as on a site


def test_a_pretraining_job_stopped_mid_stage_resumes_to_the_same_bits(slurm, ci_local_run, tmp_path) -> None:
    kind, output = PRETRAIN
    root = project_without(ci_local_run.root, tmp_path, kind, output)
    job, log = run_stopped_mid_stage(slurm, root, kind, output)
    assert_requeued_once(slurm, job, log)

    # stopped after seed 0's first round (the first safe point after the signal); seed 0 resumed there. The
    # count is a metric of each seed's run (the outputs, history.json included, are the same bits as ever)
    runs = stage_runs(root, "ci")  # the copy's own store
    runs = runs[runs["stage"] == f"{kind}@{'-'.join(CELL)}"]
    assert dict(zip(runs["tags.seed"], runs["metrics.resumed_rounds"])) == {"0": 1.0, "1": 0.0}
    weights = sorted(p.relative_to(root) for p in (root / output).rglob("*.pt"))
    assert len(weights) == 4  # model.pt and encoder.pt of each seed
    for path in weights:
        assert (root / path).read_bytes() == (ci_local_run.root / path).read_bytes(), path


def test_an_evaluation_job_stopped_mid_stage_resumes_to_the_same_bits(slurm, ci_local_run, tmp_path) -> None:
    kind, output = EVALUATE
    root = project_without(ci_local_run.root, tmp_path, kind, output)
    started_ms = time.time() * 1000
    job, log = run_stopped_mid_stage(slurm, root, kind, output)
    assert_requeued_once(slurm, job, log)

    ours = {path: value for path, value in results(root).items() if path.startswith(output)}
    assert ours and ours == {path: value for path, value in results(ci_local_run.root).items()
                             if path.startswith(output)}
    runs = stage_runs(root, "ci")  # the copy's own store
    runs = runs[(runs["stage"] == f"{kind}@{'-'.join(CELL)}") & (runs["start_time"] >= started_ms)]
    resumed = runs["tags.resumed"]  # the runs of the job's second start, one per result file
    assert len(resumed) == len(ours) and "checkpoint" in set(resumed)  # the stopped task went on from it

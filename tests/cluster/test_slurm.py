"""A real scheduler: a single-node SLURM (munge, slurmctld, slurmd from Debian's packages) runs the CI
profile with `snakemake --profile profiles/slurm-local`, the jobs logging to a tracking server
(`dssl tracking serve`), as the README's cluster section says. One stage of every kind that is a cluster
job (the first of each, with what it reads: prepare, every pretraining and evaluation kind) runs as a
SLURM job; the result files hold the same values as the local Snakemake run's (``ci_local_run``);
MLflow holds one run per job and seed, the same runs the local run logged for those stages; `dvc commit`
then leaves DVC nothing to do for them.

Why not the whole DAG: the stages of a kind differ only in their arguments, while each SLURM job pays
a cold start and the scheduler's polling; the whole DAG as SLURM jobs is what `ci_local_run` runs with
Snakemake, and its bits are compared with `dvc repro`'s (tests/pipeline/test_pipeline_e2e.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml
from ci_runs import TrackingServer, clean_env, results, run
from conftest import copy_project

from dssl.pipeline.catalogue import StageInstance, instances
from dssl.pipeline.dvcfile import pipeline_file
from dssl.tracking import stage_runs

pytestmark = pytest.mark.slow


def one_of_each_cluster_kind(params: dict) -> tuple[list[StageInstance], list[StageInstance]]:
    """The first stage of every cluster-job kind (the targets), and every stage they need: the targets,
    what they read (transitively) and the code manifests."""
    stages = instances(params)
    firsts: dict[str, StageInstance] = {}
    for stage in stages:
        if stage.kind.cluster_job:
            firsts.setdefault(stage.kind.name, stage)
    targets = list(firsts.values())
    needed, frontier = {s.name for s in targets}, list(targets)
    while frontier:
        stage = frontier.pop()
        for source in stages:
            if source.name not in needed and any(source.feeds(path) for path in stage.inputs):
                needed.add(source.name)
                frontier.append(source)
    return targets, [s for s in stages if s.name in needed or s.kind.name == "code"]


def test_one_stage_of_every_kind_on_slurm_matches_the_local_run(slurm, ci_local_run, tmp_path: Path) -> None:
    root = copy_project(tmp_path, "configs/ci.yaml")
    params = yaml.safe_load((root / "params.yaml").read_text())
    targets, needed = one_of_each_cluster_kind(params)
    assert {s.kind.name for s in targets} == {s.kind.name for s in instances(params) if s.kind.cluster_job}
    server = TrackingServer(root)
    server.start()
    try:
        outputs = [out for stage in needed for out in stage.outputs if stage in targets or stage.kind.name == "code"]
        run(["snakemake", "--profile", "profiles/slurm-local", *outputs], root,
            clean_env(MLFLOW_TRACKING_URI=server.uri))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MLFLOW_TRACKING_URI", server.uri)
            runs = stage_runs(root, "ci")
    except AssertionError as err:
        raise AssertionError(f"{err}\n{slurm.log_tail()}") from None
    finally:
        server.stop()
        server.remove()

    # every cluster-kind stage needed was one SLURM job, and each completed
    jobs = slurm.jobs()
    assert len(jobs) == sum(s.kind.cluster_job for s in needed) < len(
        [s for s in instances(params) if s.kind.cluster_job]), jobs
    assert {state for _, _, state in jobs} == {"COMPLETED"}

    # the same results as the local run (Snakemake with 2 parallel jobs, outside SLURM)
    ours = results(root)
    evaluations = [s for s in needed if s.kind.name.startswith("evaluate_")]
    assert all(any(s.writes(path) for s in evaluations) for path in ours)
    assert all(any(s.writes(path) for path in ours) for s in evaluations)
    assert ours == {path: value for path, value in results(ci_local_run.root).items() if path in ours}

    # one MLflow run per job and seed (per result file for evaluations): the local run's runs of those stages
    names = list(runs["run_name"])
    assert [n for n, count in Counter(names).items() if count > 1] == []
    assert set(runs["stage"]) == {s.name for s in needed}
    assert sorted(names) == sorted(r["run_name"] for r in ci_local_run.runs if r["stage"] in set(runs["stage"]))
    assert set(runs["tags.engine"]) == {"snakemake"}

    # DVC accepts what the cluster produced
    addresses = [f"{pipeline_file(s)}:{s.name}" for s in needed]
    run(["dvc", "commit", "-f", *addresses], root)
    assert run(["dvc", "status", "--json", *addresses], root).strip().splitlines()[-1] == "{}"

"""A real scheduler: a single-node SLURM (munge, slurmctld, slurmd from Debian's packages) runs the CI
profile with `snakemake --profile profiles/slurm-local`, the jobs logging to a tracking server
(`dssl tracking serve`), as the README's cluster section says. Every training, evaluation and prepare
stage is a SLURM job; the result files hold the same values as a local Snakemake run's; MLflow holds one run
per job and seed, the same runs the local run logged; `dvc commit -f` then leaves DVC nothing to do."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml
from cluster_run import TrackingServer, ci_local_run, clean_env, results, run, slurm  # noqa: F401 - shared fixtures
from conftest import copy_project

from dssl.pipeline.catalogue import instances
from dssl.tracking import stage_runs

pytestmark = pytest.mark.slow


def test_ci_profile_on_slurm_matches_a_local_run(slurm, tmp_path: Path, request) -> None:
    root = copy_project(tmp_path, "configs/ci.yaml")
    server = TrackingServer(root)
    server.start()
    try:
        run(["snakemake", "--profile", "profiles/slurm-local", "all"], root,
            clean_env(MLFLOW_TRACKING_URI=server.uri))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MLFLOW_TRACKING_URI", server.uri)
            runs = stage_runs(root, "ci")
    except AssertionError as err:
        raise AssertionError(f"{err}\n{slurm.log_tail()}") from None
    finally:
        server.stop()
        server.remove()

    # every training, evaluation and prepare stage was one SLURM job, and each completed
    params = yaml.safe_load((root / "params.yaml").read_text())
    cluster_stages = [s for s in instances(params) if s.kind.cluster_job]
    jobs = slurm.jobs()
    assert len(jobs) == len(cluster_stages), jobs
    assert {state for _, _, state in jobs} == {"COMPLETED"}

    # the same results as a local run (which Snakemake ran with 2 parallel jobs, outside SLURM)
    local = request.getfixturevalue("ci_local_run")
    assert results(root) == results(local.root)

    # one MLflow run per job and seed (per result file for evaluations): the local run's runs exactly
    names = list(runs["run_name"])
    assert [n for n, count in Counter(names).items() if count > 1] == []
    assert sorted(names) == sorted(r["run_name"] for r in local.runs)
    assert set(runs["tags.engine"]) == {"snakemake"}

    # DVC accepts what the cluster produced
    run(["dvc", "commit", "-f"], root)
    assert run(["dvc", "status", "--json"], root).strip().splitlines()[-1] == "{}"

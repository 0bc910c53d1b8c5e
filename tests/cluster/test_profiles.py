"""The executor profiles as Snakemake reads them: every training and evaluation job of the DAG asks for a
GPU, `prepare` is a cluster job on CPUs, and the light stages stay on the head node (`localrules`)."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dssl.pipeline.catalogue import KINDS, KINDS_BY_NAME
from dssl.pipeline.dag import snakemake_local_rules

BIN = Path(sys.executable).parent


@functools.cache
def dry_run_resources(root: Path, profile: str) -> dict[str, list[dict[str, str]]]:
    """Per rule, the resources of each of its jobs as `snakemake -n --profile <profile>` plans them."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run([str(BIN / "snakemake"), "-n", "--profile", profile], cwd=root, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    jobs: dict[str, list[dict[str, str]]] = {}
    rule = None
    for line in (out.stdout + out.stderr).splitlines():
        started = re.match(r"(?:local)?rule (\w+):", line.strip())
        if started:
            rule = started.group(1)
        elif line.strip().startswith("resources:") and rule is not None:
            pairs = (item.split("=", 1) for item in line.split(":", 1)[1].split(", "))
            jobs.setdefault(rule, []).append({key.strip(): value for key, value in pairs})
    return jobs


@pytest.fixture(scope="module")
def ci_project(tmp_path_factory) -> Path:
    from conftest import copy_project

    return copy_project(tmp_path_factory.mktemp("profiles"), "configs/ci.yaml")


def test_only_light_stages_run_on_the_head_node(ci_project: Path) -> None:
    local = snakemake_local_rules(ci_project)
    assert local == {"all", *(kind.name for kind in KINDS if not kind.cluster_job)}
    assert {"prepare", "pretrain_local", "evaluate_random"}.isdisjoint(local)
    assert {"code", "partitions", "report"} <= local


@pytest.mark.parametrize("profile", ["profiles/slurm", "profiles/gpu-local"])
def test_every_training_and_evaluation_job_requests_a_gpu(ci_project: Path, profile: str) -> None:
    jobs = dry_run_resources(ci_project, profile)
    training = {kind.name for kind in KINDS if kind.training}
    assert training <= set(jobs)  # the CI grid has a stage of every training and evaluation kind
    for rule, resources in jobs.items():
        kind = KINDS_BY_NAME.get(rule)
        wants_gpu = kind is not None and kind.training
        assert all((r.get("gpu") == "1") == wants_gpu for r in resources), (rule, resources)


def test_slurm_jobs_request_their_cores_and_prepare_runs_on_cpus(ci_project: Path) -> None:
    jobs = dry_run_resources(ci_project, "profiles/slurm")
    for kind in KINDS:
        for resources in jobs.get(kind.name, []) if kind.cluster_job else []:
            # cores per job: set per kind (a default cpus_per_task would override every cpus_per_gpu)
            assert int(resources["cpus_per_task"]) >= 8, (kind.name, resources)
            assert int(resources["runtime"]) >= 600 and int(resources["mem_mb"]) >= 32000, (kind.name, resources)
    (prepare,) = jobs["prepare"]
    assert "gpu" not in prepare and prepare["slurm_partition"] != jobs["pretrain_fl"][0]["slurm_partition"]


@pytest.mark.parametrize("profile", ["profiles/slurm", "profiles/slurm-local"])
def test_slurm_signals_training_jobs_ahead_of_their_limit_and_may_requeue_them(ci_project: Path, profile: str) -> None:
    import yaml

    assert yaml.safe_load((ci_project / profile / "config.yaml").read_text())["slurm-requeue"] is True
    for rule, resources in dry_run_resources(ci_project, profile).items():
        kind = KINDS_BY_NAME.get(rule)
        for job in resources:
            lead = re.fullmatch(r"--signal=USR1@(\d+)", job.get("slurm_extra", ""))
            assert (lead is not None) == bool(kind and kind.training), (rule, job)
            if lead:  # minutes before the limit: time for a round or a step, well inside the job
                assert 300 <= int(lead.group(1)) <= int(job["runtime"]) * 60 / 2, (rule, job)


def test_a_stage_outside_slurm_is_not_requeued() -> None:
    from dssl.pipeline.requeue import requeue_slurm_job

    assert requeue_slurm_job({}) == "not a SLURM job: run the same command again to resume"
    # no such job (or no SLURM here): the job ends with status 75 and Snakemake resubmits it
    assert requeue_slurm_job({"SLURM_JOB_ID": "999999999"}).startswith("SLURM did not requeue job 999999999 (")

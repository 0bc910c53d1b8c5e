"""The executor profiles as Snakemake reads them: every training and evaluation job of the DAG asks for a
GPU, `prepare` is a cluster job on CPUs, and the light stages stay on the head node (`localrules`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dssl.pipeline.catalogue import KINDS, KINDS_BY_NAME
from dssl.pipeline.dag import snakemake_local_rules

BIN = Path(sys.executable).parent


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

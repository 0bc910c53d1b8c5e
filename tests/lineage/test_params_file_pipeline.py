"""Another params file than params.yaml, run by Snakemake and recorded by DVC (docs/cluster.md, "Lineage
for another params file"), on configs/ci.yaml in a scratch copy of the project whose params.yaml is the
embedded default:

    dssl dag write --params configs/ci.yaml
    snakemake --cores all --configfile configs/ci.yaml
    dvc commit -f -R runs/ci
    dssl lineage runs/ci/reports/sections/table1.csv 'SimSiam + CNN' 'digits IID'

The run lands in the file's pipeline folder runs/ci/ (nothing of the embedded default changes), its
dvc.lock files record configs/ci.yaml's values, DVC finds nothing left to run, and the lineage names the
params file."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ci_runs import copy_run, shared_once, warm_env, warm_stage_server
from conftest import command_failure, copy_project

from dssl.config.params import read_params

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
FOLDER = Path("runs/ci")
# Created by the run outside its pipeline folder, none of them part of the embedded default's state:
# Snakemake's log folder (it starts in the project), DVC's cache of the new outputs and the warm server's log.
BESIDE = (".snakemake", ".dvc/cache", ".dvc/tmp", ".dvc/.gitignore", ".git", ".dssl-warm.log")


def run(cmd: list[str], cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("DVC_ROOT", None)
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, command_failure(cmd, result)
    return result.stdout + result.stderr


def lookup(params: dict, dotted: str):
    for part in dotted.split("."):
        params = params[part]
    return params


def snapshot(root: Path) -> dict[str, str]:
    """md5 of every file of the project outside the pipeline folder and the run's own bookkeeping."""
    return {p.relative_to(root).as_posix(): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()
            and not p.relative_to(root).is_relative_to(FOLDER)
            and not any(p.relative_to(root).is_relative_to(b) for b in BESIDE)}


def record(root: Path) -> tuple[Path, dict[str, str]]:
    """configs/ci.yaml run by Snakemake in its pipeline folder of a fresh project, then recorded by DVC."""
    copy_project(root)  # params.yaml: the embedded default
    run(["git", "add", "-A"], root)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "project"], root)
    before = snapshot(root)
    written = run(["dssl", "dag", "write", "--params", "configs/ci.yaml"], root)
    assert f"{FOLDER}/dvc.yaml" in written and f"{FOLDER}/pipelines/pretrain_fl/simsiam-cnn/dvc.yaml" in written
    with warm_stage_server(root, warm_env()):  # the stages, run in runs/ci/, fork from the project's server
        run(["snakemake", "--cores", "2", "--configfile", "configs/ci.yaml"], root)
    run(["dvc", "commit", "-f", "-R", str(FOLDER)], root)
    return root, before


@pytest.fixture(scope="session")
def recorded(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """One run for the whole session, shared by the xdist workers (a module fixture would run once per
    worker); the tests only read it."""
    return shared_once(tmp_path_factory, "params-file-run", record)


def test_the_run_and_its_records_stay_in_the_pipeline_folder(recorded) -> None:
    root, before = recorded
    assert snapshot(root) == before  # the embedded dvc.yaml, params.yaml, ... byte for byte; no outputs
    assert not (root / "dvc.lock").exists() and not (root / "models").exists()
    folder = root / FOLDER
    for out in ("data/prepared/digits/meta.json", "models/fl/simsiam-cnn/fl-iid/fedavg/seed-0/encoder.pt",
                "reports/sections/table1.csv", "reports/README.md", "mlflow.db"):
        assert (folder / out).is_file(), out
    status = run(["dvc", "status", "-R", str(FOLDER), "--json"], root)
    assert json.loads(status[status.index("{"):]) == {}  # DVC accepts what Snakemake produced


def test_dvc_lock_records_the_params_files_values(recorded) -> None:
    root, _ = recorded
    params = read_params(root / "configs/ci.yaml")
    locks = sorted((root / FOLDER).rglob("dvc.lock"))
    assert len(locks) == 1 + len(list((root / FOLDER / "pipelines").glob("*/*/dvc.yaml")))
    checked = 0
    for lock in locks:
        for name, stage in yaml.safe_load(lock.read_text())["stages"].items():
            assert stage["cmd"].endswith("--params ../../configs/ci.yaml"), name
            for file, values in (stage.get("params") or {}).items():
                assert file == "../../configs/ci.yaml", name
                for key, value in values.items():
                    assert value == lookup(params, key), (name, key)
                    checked += 1
    assert checked > 100


def test_lineage_names_the_params_file(recorded) -> None:
    root, _ = recorded
    answer = json.loads(run(["dssl", "lineage", "--json", f"{FOLDER}/reports/sections/table1.csv",
                             "SimSiam + CNN", "digits IID"], root))
    assert answer["params_file"] == "configs/ci.yaml" and answer["pipeline"] == str(FOLDER)
    assert answer["matches_lock"] and len(answer["results"]) == 2  # one per seed
    stages = answer["results"][0]["stages"]
    roles = {s["role"]: s for s in stages}
    assert {"evaluation", "pretraining", "partitions", "prepared dataset", "code manifests"} <= set(roles)
    assert all(s["cmd"].endswith("--params ../../configs/ci.yaml") and s["run"] for s in stages)
    assert roles["pretraining"]["params"]["pretrain.fl.train"] == \
        read_params(root / "configs/ci.yaml")["pretrain"]["fl"]["train"]
    text = run(["dssl", "lineage", f"{FOLDER}/reports/sections/table1.csv", "SimSiam + CNN", "digits IID"], root)
    assert text.startswith("params file configs/ci.yaml, pipeline folder runs/ci")


def test_a_second_params_file_of_the_same_profile_is_refused(recorded, tmp_path: Path) -> None:
    root = copy_run(recorded[0], tmp_path / "project")  # it writes a params file: not into the shared run
    twin = root / "configs" / "ci-twin.yaml"
    twin.write_text((root / "configs/ci.yaml").read_text().replace("seeds: [0, 1]", "seeds: [0]"))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    try:
        refused = subprocess.run(["dssl", "dag", "write", "--params", str(twin.relative_to(root))], cwd=root,
                                 env=env, capture_output=True, text=True)
        snake = subprocess.run(["snakemake", "-n", "--configfile", str(twin.relative_to(root))], cwd=root,
                               env=env, capture_output=True, text=True)
    finally:
        twin.unlink()
    assert refused.returncode == 1 and "holds the pipeline of configs/ci.yaml" in refused.stderr
    assert snake.returncode != 0 and "holds the pipeline of configs/ci.yaml" in snake.stdout + snake.stderr
    # a params file whose pipeline folder has no dvc.yaml yet: Snakemake says what to run first
    unrendered = subprocess.run(["snakemake", "-n", "--configfile", "configs/paper_b.yaml"], cwd=root, env=env,
                                capture_output=True, text=True)
    assert unrendered.returncode != 0
    assert "has no dvc.yaml yet: run `dssl dag write --params configs/paper_b.yaml` first" in \
        unrendered.stdout + unrendered.stderr

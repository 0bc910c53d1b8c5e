"""End to end on the CI profile: `dvc repro` runs the data, partition and graph stages offline, logs
each to MLflow, re-runs nothing the second time and only what a params change touches; Snakemake
produces byte-identical outputs that `dvc commit -f` accepts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import copy_project

from dssl.tracking import stage_runs

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def run(cmd: list[str], cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def dvc_status(cwd: Path) -> set[str]:
    out = run(["dvc", "status", "--json"], cwd)
    return set(yaml.safe_load(out.strip().splitlines()[-1]) or {})


def foundation_outputs(root: Path, params: dict) -> list[Path]:
    outs = [root / "data/prepared" / d / "train.npz" for d in params["datasets"]]
    for name in params["partitions"]:
        outs += [root / f"data/partitions/{name}/partition.json", root / f"data/partitions/{name}/counts.csv",
                 root / f"reports/figures/partitions/{name}.png"]
    for name in params["graphs"]:
        outs += [root / f"data/graphs/{name}/graph.json", root / f"reports/figures/graphs/{name}.png"]
    return outs


def test_dvc_then_snakemake(tmp_path: Path) -> None:
    dvc_root = tmp_path / "dvc"
    snake_root = tmp_path / "snake"
    for root in (dvc_root, snake_root):
        root.mkdir()
        copy_project(root, "configs/ci.yaml")
    params = yaml.safe_load((dvc_root / "params.yaml").read_text())

    # 1. the foundation stages run and write every output
    run(["dvc", "repro"], dvc_root)
    outputs = foundation_outputs(dvc_root, params)
    assert all(p.is_file() for p in outputs), [str(p) for p in outputs if not p.is_file()]

    # 2. a second repro does nothing
    again = run(["dvc", "repro"], dvc_root)
    assert "Running stage" not in again
    assert dvc_status(dvc_root) == set()

    # 3. every stage was logged to MLflow with its lineage
    runs = stage_runs(dvc_root, "ci")
    stages = {f"prepare@{d}" for d in params["datasets"]} | {f"partition@{p}" for p in params["partitions"]} \
        | {f"graph@{g}" for g in params["graphs"]}
    assert set(runs["tags.stage"]) == stages
    assert set(runs["tags.engine"]) == {"dvc"}
    graph_run = runs[runs["tags.stage"] == "graph@uniform-3"].iloc[0]
    assert graph_run["metrics.connectivity_mean"] == 3.0
    assert graph_run["tags.dvc_stage"] == "graph@uniform-3"

    # 4. a changed partition param re-runs that partition and its graphs only
    edited = yaml.safe_load((dvc_root / "params.yaml").read_text())
    edited["partitions"]["decl-label"]["alpha"] = 0.5
    (dvc_root / "params.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    assert dvc_status(dvc_root) == {"partition@decl-label"}  # DVC reports the first changed stage
    before = (dvc_root / "data/partitions/decl-label/partition.json").read_bytes()
    rerun = run(["dvc", "repro"], dvc_root)
    ran = {line.split("'")[1] for line in rerun.splitlines() if line.startswith("Running stage")}
    assert ran == {"partition@decl-label", "graph@uniform-3", "graph@general-3", "graph@complete"}
    assert (dvc_root / "data/partitions/decl-label/partition.json").read_bytes() != before
    (dvc_root / "params.yaml").write_text((snake_root / "params.yaml").read_text())
    run(["dvc", "repro"], dvc_root)

    # 5. Snakemake in parallel produces the same bytes; DVC then accepts them
    run(["snakemake", "--cores", "2", "--quiet", "all"], snake_root)
    for dvc_file, snake_file in zip(outputs, foundation_outputs(snake_root, params)):
        if dvc_file.suffix != ".png":  # figures embed nothing random, but fonts may hint differently
            assert dvc_file.read_bytes() == snake_file.read_bytes(), dvc_file
    run(["dvc", "commit", "-f"], snake_root)
    assert dvc_status(snake_root) == set()
    assert set(stage_runs(snake_root, "ci")["tags.engine"]) == {"snakemake"}


def test_a_bad_params_file_fails_before_any_output(make_project) -> None:
    root = make_project("configs/ci.yaml")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["partitions"]["fl-label"]["alpha"] = -1
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["dvc", "repro"], cwd=root, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "partitions.fl-label.alpha: must be > 0, got -1" in result.stdout + result.stderr
    assert not (root / "data/prepared").exists()

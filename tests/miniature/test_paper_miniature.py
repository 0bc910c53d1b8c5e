"""Papers A and B end to end at miniature length: `configs/paper.yaml` and `configs/paper_b.yaml`, each
derived into a miniature params file (``miniature.miniature``: lengths and sizes only; every grid, model,
strategy and report section kept) and run through Snakemake in its own pipeline folder (runs/<profile>/),
every stage kind, ResNet-18 and Tiny-ViT at their real sizes, on CIFAR python tarballs and JPEG
ImageFolder trees the test writes. The report comes out with the papers' rows."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ci_runs import warm_env, warm_stage_server
from conftest import command_failure, copy_project
from miniature import BACKBONE_SIDE, SEEDS, miniature, write_datasets

from dssl.config.params import read_params
from dssl.pipeline.catalogue import instances

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def run(cmd: list[str], cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    for leftover in ("MLFLOW_TRACKING_URI", "DSSL_ENGINE", "DVC_ROOT", "DSSL_WORKERS", "DSSL_DEVICE"):
        env.pop(leftover, None)
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, command_failure(cmd, result)
    return result.stdout + result.stderr


def derived(root: Path, profile: str) -> tuple[Path, dict, dict]:
    """configs/<profile>-mini.yaml in ``root``: the profile at miniature length on freshly written data."""
    paper = read_params(root / "configs" / f"{profile}.yaml")
    folders = write_datasets(root / "data/raw/miniature", list(paper["datasets"]))
    mini = miniature(paper, {name: os.path.relpath(folder, root) for name, folder in folders.items()})
    path = root / "configs" / f"{profile}-mini.yaml"
    path.write_text(yaml.safe_dump(mini, sort_keys=False))
    return path.relative_to(root), paper, mini


def test_the_miniature_keeps_every_grid_and_changes_only_lengths_and_sizes(tmp_path: Path) -> None:
    for profile in ("paper", "paper_b"):
        paper = read_params(Path(__file__).resolve().parents[2] / "configs" / f"{profile}.yaml")
        mini = miniature(paper, {name: f"data/{name}" for name in paper["datasets"]})
        # the same stages (one per table cell) and report sections
        assert [s.name for s in instances(mini)] == [s.name for s in instances(paper)]
        assert mini["report"] == paper["report"] and mini["models"] == paper["models"]
        assert mini["pretrain"]["fl"]["grids"] == paper["pretrain"]["fl"]["grids"]
        text = yaml.safe_dump(mini)
        assert "cuda" not in text and "bf16" not in text  # a CPU run in fp32
        assert mini["pretrain"]["image_size"] <= max(BACKBONE_SIDE.values()) and mini["seeds"] == paper["seeds"][:SEEDS]
        assert mini["evaluate"].get("grids") == paper["evaluate"].get("grids")   # each table's datasets
        assert all(spec.get("rounds", 1) == 1
                   for spec in [mini["pretrain"]["fl"]["train"],
                                *(s.get("train") or {} for s in mini["strategies"].values())])


@pytest.mark.parametrize("profile, sections", [
    ("paper", ["table1", "table2", "table5", "table6", "table7", "table8", "fig2a", "fig2b", "fig2b_decl"]),
    ("paper_b", ["fedssl_methods", "fedema", "fedema_lambda", "fedssl_predictor", "fedssl_stop_gradient",
                 "fedssl_ema"]),
])
def test_a_paper_profile_runs_end_to_end_at_miniature_length(tmp_path: Path, profile: str, sections: list[str]) -> None:
    root = copy_project(tmp_path)
    params_file, paper, mini = derived(root, profile)
    run(["dssl", "dag", "write", "--params", str(params_file)], root)
    with warm_stage_server(root, warm_env()):
        run(["snakemake", "--cores", "2", "--configfile", str(params_file)], root)
    folder = root / "runs" / paper["profile"]

    # every stage of the profile's DAG ran, on the CPU in fp32, with the real backbones
    stages = instances(mini)
    assert {s.kind.name for s in stages} >= {"prepare", "partitions", "pretrain_fl", "pretrain_central",
                                             "pretrain_local", "evaluate_fl", "evaluate_random", "report"}
    for stage in stages:
        for out in stage.outputs:
            assert (folder / out).exists(), f"{stage.name}: no {out}"
    histories = [json.loads(p.read_text()) for p in (folder / "models").rglob("history.json")]
    assert {h["device"] for h in histories} == {"cpu"}
    backbones = {spec["backbone"] for spec in mini["models"].values()}
    assert backbones >= ({"resnet18_imagenet", "tiny_vit"} if profile == "paper" else {"resnet18_cifar"})

    # the report: every section of the paper with its rows, from the measured results
    readme = (folder / "reports/README.md").read_text()
    assert f"profile **{paper['profile']}**" in readme
    for section in sections:
        assert (folder / "reports/sections" / f"{section}.csv").is_file(), section
    for section, rows in _report_rows(paper).items():
        with open(folder / "reports/sections" / f"{section}.csv", newline="") as handle:
            found = {row["row"] for row in csv.DictReader(handle)}
        assert set(rows) <= found, (section, set(rows) - found)
    if "theory" in paper["report"]["sections"]:
        assert (folder / "reports/theory/summary.md").is_file()
    _check_images_trained_as_planned(root, folder, mini)
    if profile == "paper":   # Tables 1 and 2 with every dataset column of the paper, every seed in each cell
        datasets = {"cifar10", "cifar100", "imagenet"}
        with open(folder / "reports/sections/table1.csv", newline="") as handle:
            assert {row["dataset"] for row in csv.DictReader(handle)} == datasets
        with open(folder / "reports/sections/table2.csv", newline="") as handle:
            table2 = list(csv.DictReader(handle))
        assert {row["column"] for row in table2} == datasets
        assert all(row["dataset"] == row["column"] and row["n"] == str(len(mini["seeds"])) for row in table2)


def _check_images_trained_as_planned(root: Path, folder: Path, mini: dict) -> None:
    """Every evaluation stage ran exactly the (dataset, protocol) pairs ``dssl plan`` planned for it, and the
    images each result says it trained the encoder on are the plan's (a stand-alone result: every client's)."""
    from dssl.planning.costs import CostCache
    from dssl.planning.workload import Workload

    # one cost cache for the stages (never saved): each backbone's FLOPs counted once, not once per stage
    workload = Workload(mini, root, cache=CostCache(root / "plan-costs.json"), outputs=folder)
    for stage in instances(mini):
        if not stage.kind.name.startswith("evaluate_"):
            continue
        planned = workload.stage(stage)
        records = [json.loads(p.read_text()) for p in (folder / stage.outputs[0]).rglob("*.json")]
        assert {(r["dataset"], r["protocol"]) for r in records} == set(planned.evaluation), stage.name
        assert {r["seed"] for r in records} == set(workload.seeds(stage.fields)), stage.name
        for record in records:
            clients = len(record.get("clients") or {}) or 1
            expected = planned.evaluation[(record["dataset"], record["protocol"])] * clients
            assert record["images_trained"] == expected, (stage.name, record["dataset"], record["protocol"])


def _report_rows(params: dict) -> dict[str, list[str]]:
    """The rows each table section of the report must print, as the profile names them."""
    rows = {}
    for name, options in params["report"]["sections"].items():
        named = (options or {}).get("rows")
        if isinstance(named, dict):
            rows[name] = list(named)
    return rows

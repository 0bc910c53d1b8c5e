"""The paper-scale params file validates (once the datasets are in place) and expands to the full grid."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dssl.config.params import read_params, validate
from dssl.config.grids import feature_cells, grid_cells, local_cells, weight_distance_cells
from dssl.pipeline.dag import dvc_stages, snakemake_stages

REPO = Path(__file__).resolve().parents[2]


def _with_dataset_folders(root: Path) -> None:
    for name in ("mini_imagenet", "imagenet"):
        (root / "data/raw" / name / "train").mkdir(parents=True)


def expected_stage_count(params: dict) -> int:
    """One stage per cell: its seeds, downstream datasets and protocols run inside it."""
    pretrain, evaluate = params["pretrain"], params["evaluate"]
    cells = {
        "fl": len(grid_cells(params, "fl")),
        "decl": len(grid_cells(params, "decl")),
        "central": len(pretrain["central"]["models"]),
        "local": len(local_cells(params)),
        "random": len(evaluate["random_backbones"]),
    }
    training = cells["fl"] + cells["decl"] + cells["central"] + cells["local"] + len(weight_distance_cells(params))
    training += len(feature_cells(params))   # paper A's Fig. 3 (features stages)
    # a random-init reference runs what its backbone's cells run (evaluate.protocols.random may be empty)
    evaluations = sum(n for framework, n in cells.items()
                      if evaluate["protocols"].get(framework) or framework == "random")
    # one stage per dataset and improved graph, one for all partitions and one for all graphs (if any)
    foundation = len(params["datasets"]) + len(params.get("improved_graphs") or {}) + 1 + bool(params["graphs"])
    return foundation + training + evaluations + 2 + bool(params.get("theory"))  # + code, report, theory


def test_paper_profile_needs_its_dataset_folders(tmp_path: Path) -> None:
    params = read_params(REPO / "configs/paper.yaml")
    problems = {p.path for p in validate(params, tmp_path)}
    assert problems == {"datasets.mini_imagenet.root", "datasets.imagenet.root"}
    _with_dataset_folders(tmp_path)
    assert validate(params, tmp_path) == []


def test_paper_profile_expands_to_the_full_grid(make_project) -> None:
    root = make_project("configs/paper.yaml")
    _with_dataset_folders(root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    dvc, _ = dvc_stages(root)
    assert len(dvc) == expected_stage_count(params) == 144
    assert dvc == snakemake_stages(root)
    names = {s.name for s in dvc}
    assert "pretrain_fl@mae-vit-fl-label-fedavg" in names
    assert "evaluate_decl@mae-vit-general-10-decl-uniform" in names
    # paper A's MAR grids: Fig. 2b across alpha in FL and DecL, Tables 6-8 and Table 2's baselines
    assert {"pretrain_fl@mae-vit-fl-label-a0p001-fedmar", "pretrain_decl@mae-vit-uniform-5-a0p01-decmar",
            "pretrain_fl@mae-vit-fl-label-fedmar-mmd-0p01",
            "pretrain_fl@mae-vit-fl-label-fedmar-g1", "pretrain_fl@byol-cnn-fl-label-t2-fedema",
            "pretrain_fl@simclr-cnn-fl-label-t2-featarc", "evaluate_fl@simclr-cnn-fl-label-t2-featarc",
            "pretrain_fl@ldawa-cnn-fl-label-t2-ldawa", "pretrain_fl@mae-cnn-fl-label-t2-fedmar",
            "pretrain_decl@mae-vit-general-10-decl-push-sum",
            "pretrain_fl@orchestra-cnn-fl-label-t2-orchestra", "weight_distance@mae-vit-fl-label-fedmar",
            "weight_distance@simsiam-vit-fl-label-fedavg", "pretrain_local@mae-vit-fl-label"} <= names


def test_snakemake_dry_run_with_the_paper_configfile(make_project) -> None:
    root = make_project("params.yaml")
    _with_dataset_folders(root)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    # the file's pipeline folder (runs/paper/) gets its dvc.yaml files first, so DVC can record the run
    written = subprocess.run(["dssl", "dag", "write", "--params", "configs/paper.yaml"], cwd=root, env=env,
                             capture_output=True, text=True)
    assert written.returncode == 0, written.stderr
    out = subprocess.run(["snakemake", "-n", "-p", "--configfile", "configs/paper.yaml"], cwd=root, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    expected = expected_stage_count(read_params(REPO / "configs/paper.yaml"))
    totals = {line.split()[1] for line in text.splitlines() if line.startswith("total")}
    assert totals == {str(expected + 1)}  # every stage once, plus the 'all' target; params.yaml not merged in
    assert "dssl pretrain_fl mae-vit fl-label fedavg --params ../../configs/paper.yaml" in text


def test_paper_pretraining_reads_the_prepared_array_at_its_resolution(tmp_path: Path) -> None:
    """Mini-ImageNet is decoded once, at the pretraining resolution: epochs gather from the
    memory-mapped array and never resize a batch."""
    import numpy as np
    from PIL import Image

    from dssl.data.datasets import DATASETS, load_split
    from dssl.data.imageset import MemmapImageSet, resized

    params = read_params(REPO / "configs/paper.yaml")
    pretrain = params["pretrain"]
    spec = dict(params["datasets"][pretrain["dataset"]])
    spec["root"] = str(tmp_path / "mini")
    rng = np.random.default_rng(0)
    for c in range(3):
        for i in range(5):
            path = tmp_path / "mini" / "train" / f"n0{c}" / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)).save(path)
    meta = DATASETS[pretrain["dataset"]].prepare(spec, tmp_path / "prepared")
    assert meta["format"] == "memmap" and meta["image_size"] == pretrain["image_size"]
    train = load_split(tmp_path / "prepared", "train")
    assert isinstance(train, MemmapImageSet)
    assert resized(train, pretrain["image_size"]) is train
    assert tuple(train.get_batch([0, 1]).shape) == (2, 3, pretrain["image_size"], pretrain["image_size"])


def test_paper_b_profile_expands_to_its_tables(make_project) -> None:
    """Paper B pretrains on CIFAR-10 (its own profile): generalised methods, FedU / FedEMA with the lambda
    sweep, the stand-alone and centralised references, and the predictor / stop-gradient / EMA ablations, each cell
    once, the same DAG for both engines."""
    root = make_project("configs/paper_b.yaml")
    params = yaml.safe_load((root / "params.yaml").read_text())
    assert validate(params, root) == []
    dvc, _ = dvc_stages(root)
    assert len(dvc) == expected_stage_count(params) == 75
    assert dvc == snakemake_stages(root)
    names = {s.name for s in dvc}
    assert {"pretrain_fl@moco-v2-r18-fl-2class-fedssl", "pretrain_fl@byol-r18-fl-2class-fedema",
            "pretrain_fl@moco-v1-r18-fl-iid-fedssl-constant-lr", "pretrain_fl@byol-r18-fl-6class-fedu",
            "pretrain_fl@byol-r18-fl-2class-fedema-l1p6", "pretrain_fl@simsiam-nopred-fl-2class-fedssl",
            "pretrain_fl@simsiam-nosg-fl-2class-fedssl",
            "evaluate_central@byol-r18", "pretrain_local@byol-r18-fl-2class",
            "evaluate_local@byol-r18-fl-2class"} <= names
    assert not any(name.startswith(("graphs", "theory", "pretrain_decl")) for name in names)


def test_table2_cells_carry_their_own_schedule() -> None:
    """Table 2 trains 200 rounds of 10 local epochs (Table 1: 100 x 2): its strategy entries say so."""
    from dssl.pipeline.pretrain import train_schedule

    params = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    assert train_schedule(params, "fl", "t2-fedmar")["rounds"] == 200
    assert train_schedule(params, "fl", "t2-fedmar")["local_epochs"] == 10
    assert train_schedule(params, "fl", "fedmar") == params["pretrain"]["fl"]["train"]


def test_paper_b_cifar100_profile_expands_to_its_column(make_project) -> None:
    """Paper B's CIFAR-100 column pretrains on CIFAR-100 with 20 of the 100 classes per client: its own profile."""
    root = make_project("configs/paper_b_cifar100.yaml")
    params = yaml.safe_load((root / "params.yaml").read_text())
    assert validate(params, root) == []
    dvc, _ = dvc_stages(root)
    assert len(dvc) == expected_stage_count(params)
    assert dvc == snakemake_stages(root)
    names = {s.name for s in dvc}
    assert {"prepare@cifar100", "pretrain_fl@byol-r18-fl-20class-fedema", "pretrain_fl@simsiam-r18-fl-iid-fedssl",
            "pretrain_local@byol-r18-fl-20class"} <= names


def test_each_table2_baseline_trains_with_its_authors_recipe() -> None:
    """Table 2's baselines carry their own optimizer, lr at their batch size and schedule; FedMAR paper A's."""
    from dssl.pipeline.pretrain import optimizer_config, train_schedule

    params = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    recipes = {"t2-fedu": ("byol-cnn", "sgd", 0.032, 128, "cosine"),
               "t2-fedema": ("byol-cnn", "sgd", 0.032, 128, "cosine"),
               "t2-ldawa": ("ldawa-cnn", "sgd", 0.03, 256, "constant"),
               "t2-featarc": ("simclr-cnn", "adam", 1.0e-3, 256, "constant"),
               "t2-orchestra": ("orchestra-cnn", "sgd", 0.003, 16, "constant")}
    for strategy, (model, name, lr, batch, schedule) in recipes.items():
        recipe, train = optimizer_config(params, model, strategy), train_schedule(params, "fl", strategy)
        assert (recipe["name"], train["batch_size"], recipe.get("schedule", "constant")) == (name, batch, schedule)
        assert recipe["base_lr"] * batch / 256 == pytest.approx(lr), strategy   # the authors' lr at their batch
        assert (train["rounds"], train["local_epochs"]) == (200, 10)
    assert optimizer_config(params, "mae-cnn", "t2-fedmar") == params["pretrain"]["optimizers"]["cnn"]

"""What each evaluation stage runs (``config.evaluation_plan``): one function for the stages, the catalogue and
``dssl plan``; paper A's profile fine-tunes each table's cells on the datasets the table reports."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from dssl.config.checker import Checker
from dssl.config.evaluation_plan import cell_pairs, protocol_config, random_pairs, stage_pairs
from dssl.config.params import read_params
from dssl.config.sections.evaluate import check_evaluate
from dssl.config.sections.report import check_report
from dssl.pipeline.catalogue import instances
from dssl.planning.workload import Workload, evaluation_counts

REPO = Path(__file__).resolve().parents[2]
ALL_THREE = ["cifar10", "cifar100", "imagenet"]


@pytest.fixture(scope="module")
def paper() -> dict:
    return read_params(REPO / "configs" / "paper.yaml")


def test_each_table_of_paper_a_is_fine_tuned_on_the_datasets_it_reports(paper):
    # Table 1 and Table 2 cells: CIFAR-10, CIFAR-100 and ImageNet
    assert cell_pairs(paper, "fl", ("simsiam-cnn", "fl-feature", "fedavg")) == [(d, "finetune") for d in ALL_THREE]
    assert cell_pairs(paper, "fl", ("byol-cnn", "fl-label", "t2-fedema")) == [(d, "finetune") for d in ALL_THREE]
    # Fig. 2a, 2b, Tables 6-8: CIFAR-100 only; a cell Table 1 and Fig. 2b share keeps Table 1's three
    assert cell_pairs(paper, "decl", ("mae-vit", "uniform-3", "decl-uniform")) == [("cifar100", "finetune")]
    assert cell_pairs(paper, "fl", ("mae-vit", "fl-label-a0p01", "fedmar")) == [("cifar100", "finetune")]
    assert cell_pairs(paper, "fl", ("mae-vit", "fl-label", "fedmar-cos-0p1")) == [("cifar100", "finetune")]
    assert cell_pairs(paper, "fl", ("mae-vit", "fl-label", "fedavg")) == [(d, "finetune") for d in ALL_THREE]
    # no central rows in the paper: its central cells (Table 1's references here) are read on CIFAR-100 only;
    # the random-init reference runs what the cells of its backbone run (the gate of their claims)
    assert cell_pairs(paper, "central", ("mae-vit",)) == [("cifar100", "finetune")]
    assert random_pairs(paper, "tiny_vit") == [(d, "finetune") for d in ALL_THREE]
    assert "evaluate_random@tiny_vit" in [stage.name for stage in instances(paper)]


def test_the_catalogue_depends_on_the_datasets_and_entries_the_stages_read(paper):
    stages = {stage.name: stage for stage in instances(paper)}
    decl = stages["evaluate_decl@mae-vit-uniform-3-decl-uniform"]
    assert "data/prepared/cifar100" in decl.inputs and "evaluate.grids" in decl.params_keys
    assert "evaluate.finetune" in decl.params_keys and "evaluate.linear_probe" not in decl.params_keys


def test_the_plan_counts_each_dataset_with_the_config_the_stage_builds(paper, tmp_path):
    """Fig. 2a's cell is planned on CIFAR-100 only, at its 100 epochs; Table 1's CNN cell on three datasets,
    ImageNet at 20 epochs of batch 1024 (per_dataset), each with the config ``protocol_config`` gives the stage."""
    workload = Workload(paper, REPO)
    stages = {stage.name: stage for stage in instances(paper)}
    fig2a = workload.stage(stages["evaluate_decl@mae-vit-uniform-3-decl-uniform"])
    table1 = workload.stage(stages["evaluate_fl@simsiam-cnn-fl-iid-fedavg"])
    assert set(fig2a.evaluation) == {("cifar100", "finetune")}
    assert set(table1.evaluation) == {(d, "finetune") for d in ALL_THREE}
    for dataset, train, classes in (("cifar100", 50_000, 100), ("imagenet", 1_281_167, 1000)):
        config = protocol_config(paper, "finetune", dataset, "resnet18_imagenet")
        fit = train - evaluation_counts(train, classes, config.val_fraction)
        per_epoch = fit - (1 if fit % config.batch_size == 1 else 0)
        assert table1.evaluation[(dataset, "finetune")] == len(config.lr_grid) * config.epochs * per_epoch
    assert protocol_config(paper, "finetune", "imagenet", "resnet18_imagenet").epochs == 20
    assert protocol_config(paper, "finetune", "imagenet", "resnet18_imagenet").batch_size == 1024
    assert protocol_config(paper, "finetune", "cifar100", "tiny_vit").rand_augment   # the ViT recipe
    assert fig2a.evaluation[("cifar100", "finetune")] < table1.evaluation[("imagenet", "finetune")] / 5


def test_a_grid_without_an_entry_reads_the_defaults():
    embedded = read_params(REPO / "params.yaml")
    first = next(stage for stage in instances(embedded) if stage.kind.name == "evaluate_fl")
    cell = tuple(first.fields[arg] for arg in first.kind.args)
    assert stage_pairs(embedded, "fl", cell) == [("digits", p) for p in embedded["evaluate"]["protocols"]["fl"]]
    # without evaluate.protocols.random a reference runs what its backbone's cells run: the ViT's are read on
    # kNN (evaluate.grids), its central and stand-alone cells on the 10 %-label probe too; nothing fine-tunes
    assert "random" not in embedded["evaluate"]["protocols"]
    assert stage_pairs(embedded, "random", ("cnn_small",)) == [("digits", "linear_probe_10pct"), ("digits", "knn")]
    assert sorted(stage_pairs(embedded, "random", ("vit_small",))) == [("digits", "knn"),
                                                                       ("digits", "linear_probe_10pct")]


@pytest.mark.parametrize("grids, path, message", [
    ({"table9": {"datasets": ["cifar100"]}}, "evaluate.grids.table9", "is not a grid"),
    ({"table1": {"datasets": ["svhn"]}}, "evaluate.grids.table1.datasets[0]", "is not defined in 'datasets'"),
    ({"table1": {"protocols": ["probe"]}}, "evaluate.grids.table1.protocols[0]", "is not defined in 'protocols'"),
    ({"table1": {"epochs": 3}}, "evaluate.grids.table1.epochs", "unknown key"),
])
def test_bad_evaluation_grids_are_named_by_their_key_path(paper, grids, path, message):
    params = copy.deepcopy(paper)
    params["evaluate"]["grids"] = grids
    checker = Checker(params, REPO)
    check_evaluate(checker)
    assert any(p.path == path and message in p.message for p in checker.problems), checker.problems


def test_a_section_reading_a_dataset_no_stage_evaluates_is_named(paper):
    params = copy.deepcopy(paper)
    params["evaluate"]["grids"].pop("table2-ldawa")
    params["evaluate"]["grids"]["table2"] = {"datasets": ["cifar100"]}
    params["report"]["sections"]["table2"]["columns"]["svhn"] = {"place": "fl-label", "dataset": "svhn"}
    checker = Checker(params, REPO)
    check_report(checker)
    assert [p.path for p in checker.problems] == ["report.sections.table2.columns.svhn.dataset"]


def test_the_images_an_evaluation_stage_trains_are_what_the_plan_says(tmp_path, monkeypatch):
    """A random-init fine-tuning stage of the CI profile (two learning rates, two epochs, every seed its
    backbone's cells run) writes per result the images it trained the encoder on: the plan's count."""
    import json

    import yaml

    from dssl.pipeline import evaluate, prepare
    from dssl.pipeline.common import Stage

    params = read_params(REPO / "configs" / "ci.yaml")
    params["evaluate"]["protocols"]["random"] = ["finetune"]
    params["evaluate"]["finetune"].update({"lr_grid": [1.0e-3, 3.0e-4], "epochs": 2, "batch_size": 100})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(Stage, "log_runs", lambda self, records, **kwargs: [None] * len(records))
    prepare.run("digits", tmp_path / "params.yaml")
    out = evaluate.run_random("cnn_small", tmp_path / "params.yaml")
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / out).rglob("*.json"))]
    stage = next(s for s in instances(params) if s.name == "evaluate_random@cnn_small")
    planned = Workload(params, tmp_path).stage(stage)
    assert set(planned.evaluation) == {(r["dataset"], r["protocol"]) for r in records} == {("digits", "finetune")}
    assert len(records) == len(Workload(params, tmp_path).seeds(stage.fields)) > 1
    assert {r["images_trained"] for r in records} == {planned.evaluation[("digits", "finetune")]}
    fit = records[0]["selected"]["num_fit"]
    assert planned.evaluation[("digits", "finetune")] == 2 * 2 * (fit - (fit % 100 == 1))   # lrs x epochs x fit


@pytest.mark.parametrize("change, section, cell", [
    (("grids", "table7", {"protocols": ["linear_probe_10pct"]}), "table7", "fl/mae-vit/fl-label/fedmar-cos-0p1"),
    (("grids", "table1-vit", {"protocols": ["linear_probe_10pct"]}), "table1", "fl/mae-vit/fl-feature/fedavg"),
    (("protocols", "decl", ["linear_probe_10pct"]), "fig2a", "decl/mae-vit/uniform-3/decl-uniform"),
])
def test_a_table_read_on_a_protocol_its_cells_are_not_evaluated_on_fails_validation(change, section, cell):
    """evaluate.grids may leave a protocol out of a table's cells; a section that reads them on it would lack
    them after the run, so the params are refused first, naming the cell, what it runs and where to add it.
    A cell another table reads on the protocol keeps it (Table 1's IID ViT cell is Fig. 2b's too)."""
    from dssl.reporting.sections.base import check_report_params

    embedded = read_params(REPO / "params.yaml")
    checker = Checker(embedded, REPO)
    check_report_params(checker)
    assert checker.problems == []
    key, entry, value = change
    changed = copy.deepcopy(embedded)
    changed["evaluate"][key][entry] = value
    checker = Checker(changed, REPO)
    check_report_params(checker)
    problems = [p for p in checker.problems if p.path == f"report.sections.{section}"]
    assert any(f"{cell} is read on knn on digits, but its evaluation runs linear_probe_10pct on digits" in p.message
               for p in problems), checker.problems
    assert all("add knn to evaluate.grids" in p.message for p in problems)
    assert not any("fl/mae-vit/fl-iid/fedavg" in p.message for p in checker.problems)

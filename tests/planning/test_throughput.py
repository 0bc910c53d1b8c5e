"""The rates a plan converts FLOPs with: pretraining rows for training, fine-tuning rows for evaluation."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from dssl.artifacts import ArtifactError
from dssl.planning.throughput import EVAL_KEYS, EVALUATION, TRAINING, Throughput, merge_results, read_results

ROW = {"device": "cuda", "device_name": "NVIDIA Test GPU", "backbone": "resnet18_imagenet", "option": "bf16",
       "size": 224, "flops_per_image": 1e10, "date": "2026-01-01T00:00:00Z"}
PRETRAIN = {**ROW, "method": "simsiam", "batch": 128, "images_per_s": 4000.0}
CIFAR = {**ROW, "method": "finetune", "dataset": "cifar100", "batch": 256, "images_per_s": 3000.0}
IMAGENET = {**ROW, "method": "finetune", "dataset": "imagenet", "batch": 1024, "images_per_s": 2000.0}


def _files(tmp_path: Path, pretrain: list[dict], finetune: list[dict]) -> Path:
    merge_results(tmp_path / "gpu_round.json", pretrain)
    if finetune:
        merge_results(tmp_path / "finetune_rate.json", finetune, EVAL_KEYS)
    return tmp_path / "gpu_round.json"


def test_evaluation_is_converted_with_fine_tuning_rows_only(tmp_path: Path) -> None:
    throughput = Throughput.from_file(_files(tmp_path, [PRETRAIN], [CIFAR, IMAGENET]))
    training = throughput.rate("resnet18_imagenet", 224, "bf16", TRAINING)
    assert training.flops_per_s == pytest.approx(4000 * 1e10) and training.measured
    assert training.label == "measured: gpu_round NVIDIA Test GPU simsiam resnet18_imagenet bf16 224 px batch 128"
    # a stage of several datasets gets the slowest row (its hours an upper bound); a dataset its own row
    slowest = throughput.rate("resnet18_imagenet", 224, "bf16", EVALUATION)
    assert slowest.flops_per_s == pytest.approx(2000 * 1e10)
    assert slowest.label == ("measured: finetune_rate NVIDIA Test GPU finetune imagenet resnet18_imagenet bf16 "
                             "224 px batch 1024")
    assert "benchmarks/finetune_rate.py" in slowest.source and "imagenet-shaped" in slowest.source
    cifar = throughput.rate("resnet18_imagenet", 224, "bf16", EVALUATION, dataset="cifar100")
    assert cifar.flops_per_s == pytest.approx(3000 * 1e10)


def test_without_fine_tuning_rows_the_evaluation_rate_is_assumed(tmp_path: Path) -> None:
    throughput = Throughput.from_file(_files(tmp_path, [PRETRAIN], []), gpu="h200", share=0.25)
    rate = throughput.rate("resnet18_imagenet", 224, "bf16", EVALUATION)
    assert not rate.measured and rate.flops_per_s == pytest.approx(0.25 * 989e12)   # not pretraining's rate
    assert rate.label == "assumed: 25% x NVIDIA H200 SXM bf16 peak"
    assert "no finetune_rate.py result for resnet18_imagenet at 224 px, bf16" in rate.source
    with pytest.raises(ValueError, match="purpose must be"):
        throughput.rate("resnet18_imagenet", 224, "bf16", "inference")


def test_cpu_rows_and_other_gpus_never_set_a_rate(tmp_path: Path) -> None:
    cpu = {**CIFAR, "device": "cpu", "device_name": "CPU"}
    throughput = Throughput.from_file(_files(tmp_path, [PRETRAIN], [cpu]))
    assert not throughput.rate("resnet18_imagenet", 224, "bf16", EVALUATION).measured
    other = Throughput.from_file(_files(tmp_path, [PRETRAIN], [CIFAR]), gpu_name="H200")
    assert not other.rate("resnet18_imagenet", 224, "bf16", EVALUATION).measured


def test_fine_tuning_rows_merge_by_dataset_too(tmp_path: Path) -> None:
    path = tmp_path / "finetune_rate.json"
    merge_results(path, [CIFAR, {**CIFAR, "dataset": "cifar10"}], EVAL_KEYS)
    merge_results(path, [{**CIFAR, "images_per_s": 10.0}], EVAL_KEYS)   # replaces the cifar100 row only
    assert sorted((r["dataset"], r["images_per_s"]) for r in read_results(path, EVAL_KEYS)) == [
        ("cifar10", 3000.0), ("cifar100", 10.0)]
    path.write_text(json.dumps([{k: v for k, v in CIFAR.items() if k != "dataset"}]))
    with pytest.raises(ArtifactError, match="dataset") as caught:
        read_results(path, EVAL_KEYS)
    assert "run benchmarks/finetune_rate.py again" in str(caught.value)


def _tiny_project(tmp_path: Path) -> Path:
    """The planning tests' tiny params (digits at 8 px, a cnn_small FL cell fine-tuned) in a project folder."""
    spec = importlib.util.spec_from_file_location("plan_tests", Path(__file__).with_name("test_plan.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "params.yaml").write_text(module.TINY)
    return tmp_path


def test_the_plan_names_the_rate_behind_every_stage(tmp_path: Path) -> None:
    from dssl.planning.costs import CostCache
    from dssl.planning.plan import as_json, make_plan, render

    root, cache = _tiny_project(tmp_path), CostCache(tmp_path / "costs.json")
    row = {**ROW, "backbone": "cnn_small", "option": "plain", "size": 8}
    results = _files(tmp_path, [{**PRETRAIN, **row}], [])
    assumed = make_plan(root / "params.yaml", root, results=results, cache=cache)
    assert any("the evaluation rate is assumed" in note for note in assumed.notes)
    merge_results(tmp_path / "finetune_rate.json", [{**CIFAR, **row, "dataset": "digits", "images_per_s": 50.0}],
                  EVAL_KEYS)
    plan = make_plan(root / "params.yaml", root, results=results, cache=cache)
    assert not any("evaluation rate is assumed" in note for note in plan.notes)
    train, evaluate = plan.stage("pretrain_fl@simsiam-iid3-fedavg"), plan.stage("evaluate_fl@simsiam-iid3-fedavg")
    assert plan.hours[train.stage] == pytest.approx(train.total_flops / (4000 * 1e10) / 3600)
    assert plan.hours[evaluate.stage] == pytest.approx(evaluate.total_flops / (50 * 1e10) / 3600)
    lines = {line.split()[0]: line for line in render(plan, stages=True).splitlines() if line.startswith("  ")}
    assert lines[train.stage].endswith("measured: gpu_round NVIDIA Test GPU simsiam cnn_small plain 8 px batch 128")
    assert lines[evaluate.stage].endswith("measured: finetune_rate NVIDIA Test GPU finetune digits cnn_small "
                                          "plain 8 px batch 256")
    stages = {s["stage"]: s for s in as_json(plan)["stages"]}
    assert all(stages[name]["rates"] for name in plan.hours)
    assert as_json(plan)["evaluation_throughput"]["cnn_small plain"]["measured"]

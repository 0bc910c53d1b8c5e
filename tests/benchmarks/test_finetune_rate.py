"""benchmarks/finetune_rate.py runs the fine-tuning step of both recipes on both data shapes and writes rows
the plan reads for evaluation stages (here on the CPU, a few steps at a tiny size: it checks the benchmark
works, not how fast anything is; CPU rows never become a plan's rate)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dssl.planning.throughput import EVAL_KEYS, EVALUATION, Throughput, read_results

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--device", "cpu", "--size", "28", "--cifar-batch", "4", "--imagenet-batch", "6", "--steps", "2",
        "--warmup", "1", "--images", "12", "--options", "plain", "--threads", "1"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "finetune_rate.py"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow   # four cases of a few steps each: ~40 s on 2 shared cores
def test_finetune_rate_times_both_recipes_and_writes_rows(tmp_path: Path) -> None:
    results = tmp_path / "finetune_rate.json"
    done = run(*ARGS, "--results", str(results), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    timed = {(line[0], line[1]): line for line in lines if line and line[0] in ("cifar", "imagenet")}
    models = ("resnet18_imagenet", "tiny_vit")
    assert set(timed) == {(case, model) for case in ("cifar", "imagenet") for model in models}
    assert all(float(line[4]) > 0 for line in timed.values())   # images/s
    assert "RandAugment rand-m9-mstd0.5-inc1" in " ".join(timed["cifar", "tiny_vit"])
    rows = read_results(results, EVAL_KEYS)
    assert {(r["dataset"], r["backbone"], r["batch"]) for r in rows} == {
        (dataset, model, batch) for dataset, batch in (("cifar100", 4), ("imagenet", 6))
        for model in models}
    assert all(r["device"] == "cpu" and r["steps"] == 2 and r["flops_per_image"] > 0 for r in rows)
    vit = next(r for r in rows if r["backbone"] == "tiny_vit" and r["dataset"] == "imagenet")
    assert "mixup 0.8 / cutmix 1.0" in vit["recipe"] and "random erasing 0.25" in vit["recipe"]
    rate = Throughput([], eval_rows=rows).rate("tiny_vit", 28, "plain", EVALUATION)
    assert not rate.measured   # a CPU row is no GPU's rate


@pytest.mark.slow
def test_a_cpu_run_writes_nothing_unless_asked(tmp_path: Path) -> None:
    done = run(*ARGS, "--cases", "cifar", "--models", "resnet18_imagenet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "wrote" not in done.stdout and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [(["--cases", "svhn"], "unknown case(s) ['svhn']"),
                                           (["--steps", "0"], "--steps must be >= 1, got 0")])
def test_bad_options_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    bad = run("--device", "cpu", *args, cwd=tmp_path)
    assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr

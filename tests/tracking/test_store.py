"""The MLflow store: one SQLite file, safe under parallel stage processes, with lineage tags."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dssl.tracking import StageRecord, log_stage, stage_runs
from dssl.tracking.lineage import (KERNEL_PINS, content_hash, cpu_model, hardware, hardware_label, label_pins,
                                   params_hash)

WRITER = """
import sys
from pathlib import Path
from dssl.tracking import StageRecord, log_stage
root = Path(sys.argv[1]); i = int(sys.argv[2])
log_stage(StageRecord(f"partition@job-{i}", {"partitions": {f"job-{i}": {"clients": i}}},
                      metrics={"value": float(i)}, inputs=[Path("in.txt")]), "concurrency", root)
"""


@pytest.mark.slow
def test_parallel_writers_on_a_fresh_store(tmp_path: Path) -> None:
    """8 stage processes start at once on a store nobody created: the file lock serialises creation."""
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "in.txt").write_text("input\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DSSL_ENGINE", "DVC_STAGE", "DVC_ROOT")}
    jobs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(i)], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(8)
    ]
    results = [(job.wait(timeout=300), job.stderr.read()) for job in jobs]
    assert all(code == 0 for code, _ in results), [err for code, err in results if code]

    runs = stage_runs(tmp_path, "concurrency")
    assert sorted(runs["tags.stage"]) == sorted(f"partition@job-{i}" for i in range(8))
    assert set(runs["metrics.value"]) == {float(i) for i in range(8)}
    row = runs[runs["tags.stage"] == "partition@job-3"].iloc[0]
    assert row["params.partitions.job-3.clients"] == "3"
    assert row["tags.params_hash"] == params_hash({"partitions": {"job-3": {"clients": 3}}})
    assert row["tags.input.in.txt"] == content_hash(tmp_path / "in.txt")
    assert row["tags.engine"] == "manual"
    assert {"tags.git_commit", "tags.git_dirty"} <= set(runs.columns)


def test_params_hash_is_canonical() -> None:
    assert params_hash({"a": 1, "b": {"c": 2}}) == params_hash({"b": {"c": 2}, "a": 1})
    assert params_hash({"a": 1}) != params_hash({"a": 2})


def test_content_hash_of_folder_depends_on_names_and_bytes(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("1")
    first = content_hash(tmp_path / "d")
    (tmp_path / "d" / "x").write_text("2")
    assert content_hash(tmp_path / "d") != first


def test_metric_names_are_made_valid_for_mlflow() -> None:
    from dssl.tracking import metric_name

    assert metric_name("holds.thm4.4[decl,cl>mim].sensitivity") == "holds.thm4.4_decl_cl_mim_.sensitivity"
    assert metric_name("a-b_c.d e:f/g") == "a-b_c.d e:f/g"


def test_logging_leaves_no_tracking_uri_for_later_processes(tmp_path: Path, monkeypatch) -> None:
    """Another project's stages started later from this process must not log into this store."""
    from dssl.tracking import StageRecord, log_stage

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    log_stage(StageRecord("prepare@x", {"datasets": {"x": {}}}, metrics={"value": 1.0}), "leak", tmp_path)
    assert "MLFLOW_TRACKING_URI" not in os.environ
    assert len(stage_runs(tmp_path, "leak")) == 1


def test_hardware_names_the_cpu_and_the_kernels_the_numbers_depend_on(monkeypatch) -> None:
    import torch

    for name in KERNEL_PINS:
        monkeypatch.delenv(name, raising=False)
    facts = hardware()
    assert facts["hardware.kernel_pins"] == "none"
    assert facts["hardware.cpu"] == cpu_model() and facts["hardware.cpu"] != "unknown"
    assert facts["hardware.cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert facts["hardware.torch"] == torch.__version__ and facts["hardware.accelerator"] == "none"
    label = hardware_label(facts)
    assert label == f"{facts['hardware.cpu']} ({facts['hardware.cpu_capability']}), torch {torch.__version__}"
    assert hardware_label({**facts, "hardware.accelerator": "NVIDIA H200"}).endswith(", NVIDIA H200")
    assert hardware_label({"hardware.cpu": "Some CPU"}) == "Some CPU"  # a stage that never loaded torch
    assert label_pins(label) == {}


def test_a_pinned_stage_records_its_pins_in_its_hardware(monkeypatch) -> None:
    """`ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2` on an AVX512 CPU gives an AVX2 CPU's bits: the
    result files and MLflow tags say the run was pinned, and a verdict record reads the pins back."""
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.delenv("MKL_CBWR", raising=False)
    facts = hardware()
    assert facts["hardware.kernel_pins"] == "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2"
    label = hardware_label(facts)
    assert label.endswith(", kernels pinned: ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2")
    assert label_pins(label) == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def test_every_run_is_tagged_with_its_hardware(tmp_path: Path) -> None:
    import torch  # noqa: F401  (stages that train have torch loaded)

    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    log_stage(StageRecord("partition@one", {"partitions": {"one": {"clients": 1}}}), "hardware", tmp_path)
    row = stage_runs(tmp_path, "hardware").iloc[0]
    for key, value in hardware().items():
        assert row[f"tags.{key}"] == value

"""The commands that stage, lineage and verdict messages quote work as printed, on a copy of the session's
`dssl repro` run of the CI profile (``ci_runs.ci_dvc_run``): a missing encoder (weight_distance, features),
a missing report table (`dssl lineage`), result files of mixed kernel pins (`dssl verdicts export`). Each
message is one line with exit 2; its command is run as printed, in the folder the message was printed in,
and the command that failed then succeeds."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from ci_runs import clean_env, copy_run

GLOBAL_ENCODER = "models/fl/simsiam-cnn/fl-label/fedavg/seed-0/encoder.pt"
LOCAL_ENCODER = "models/local/simsiam-cnn/fl-label/seed-0/client-3/encoder.pt"
TABLE = "reports/sections/table1.csv"


@pytest.fixture
def project(ci_dvc_run, tmp_path) -> Path:
    return copy_run(ci_dvc_run, tmp_path / "ci")


def run(cmd: list[str] | str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True, shell=isinstance(cmd, str),
                          timeout=900)


def quoted(answer: subprocess.CompletedProcess) -> list[str]:
    """The commands a refusal quotes (exit 2, one line)."""
    err = answer.stderr.strip()
    assert answer.returncode == 2 and "\n" not in err and "Traceback" not in err, err
    return re.findall(r"`([^`]+)`", err)


def works(command: str, cwd: Path) -> None:
    result = run(command, cwd)
    assert result.returncode == 0, f"{command}: {result.stderr[-2000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("stage, missing, producer", [
    (["weight_distance", "simsiam-cnn", "fl-label", "fedavg"], GLOBAL_ENCODER,
     "pipelines/pretrain_fl/simsiam-cnn/dvc.yaml:pretrain_fl@simsiam-cnn-fl-label-fedavg"),
    (["features", "simsiam-cnn", "fl-label", "fedavg"], LOCAL_ENCODER,
     "pipelines/pretrain_local/simsiam-cnn/dvc.yaml:pretrain_local@simsiam-cnn-fl-label"),
])
def test_a_missing_encoder_names_the_command_that_writes_it(project: Path, stage: list[str], missing: str,
                                                            producer: str) -> None:
    (project / missing).unlink()
    (command,) = quoted(run(["dssl", *stage], project))
    assert command == f"dvc repro {producer}"
    works(command, project)
    assert (project / missing).is_file()
    works(f"dssl {' '.join(stage)}", project)


@pytest.mark.slow
def test_a_missing_table_names_a_command_that_works_from_a_subfolder(project: Path) -> None:
    (project / TABLE).unlink()
    where = project / "reports"
    lineage = ["dssl", "lineage", f"../{TABLE}", "SimSiam + CNN", "digits IID"]
    (command,) = quoted(run(lineage, where))
    assert command == "dvc repro ../dvc.yaml:report"
    works(command, where)
    works(lineage, where)


@pytest.mark.slow
def test_results_of_mixed_kernel_pins_name_the_stages_to_rerun_and_how(project: Path) -> None:
    path = sorted((project / "reports/metrics/fl").rglob("*.json"))[0]
    result = json.loads(path.read_text())
    result["hardware"] += ", kernels pinned: ATEN_CPU_CAPABILITY=avx2"
    path.write_text(json.dumps(result))
    export = ["dssl", "verdicts", "export", "--label", "here"]
    (command,) = quoted(run(export, project))
    assert re.fullmatch(r"env -u ATEN_CPU_CAPABILITY dvc repro -s -f pipelines/evaluate_fl/[^ ]+/dvc\.yaml:"
                        r"evaluate_fl@[^ ]+", command), command
    works(command, project)
    works(export, project)

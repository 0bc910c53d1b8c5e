"""Every command an exit-2 message gives to recover a damaged or missing stage output works as printed.

On a copy of the session's `dssl repro` run of the CI profile (``ci_runs.ci_dvc_run``): a stage input is
damaged (truncated) or removed for real, the stage reading it stops with exit 2 and one line, and each
command quoted in that line is run as printed, in the folder the stage ran in; the output is then the
recorded one again, byte for byte (DVC's cache, or the producing stage re-run: the stages are bit-stable).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from ci_runs import clean_env, copy_run

pytestmark = pytest.mark.slow

PREPARED = "data/prepared/digits/train.npz"
ENCODER = "models/fl/simsiam-cnn/fl-label/fedavg/seed-1/encoder.pt"
PARTITION = "data/partitions/fl-label/partition.json"


@pytest.fixture(scope="module")
def project(ci_dvc_run, tmp_path_factory) -> Path:
    return copy_run(ci_dvc_run, tmp_path_factory.mktemp("recovery") / "ci")


def run(cmd: list[str] | str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True, shell=isinstance(cmd, str),
                          timeout=900)


def refused(project: Path, stage: list[str], damaged: str) -> list[str]:
    """Run the stage on its damaged input: exit 2, one line naming the file; the commands it quotes."""
    answer = run(["dssl", *stage], project)
    err = answer.stderr.strip()
    assert answer.returncode == 2 and "\n" not in err and err.startswith(f"error: {damaged}: "), err
    return re.findall(r"`([^`]+)`", err)


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("damaged, stage, producer", [
    (PREPARED, ["partitions"], "pipelines/prepare/digits/dvc.yaml:prepare@digits"),
    (ENCODER, ["evaluate_fl", "simsiam-cnn", "fl-label", "fedavg"],
     "pipelines/pretrain_fl/simsiam-cnn/dvc.yaml:pretrain_fl@simsiam-cnn-fl-label-fedavg"),
])
def test_restore_and_rebuild_commands_of_a_damaged_output_work(project: Path, damaged: str, stage: list[str],
                                                               producer: str) -> None:
    path = project / damaged
    recorded = path.read_bytes()
    truncate(path)
    restore, rebuild = refused(project, stage, damaged)
    assert restore == f"dvc checkout --force {damaged}" and rebuild == f"dvc repro -s -f {producer}"
    result = run(restore, project)
    assert result.returncode == 0, result.stderr
    assert path.read_bytes() == recorded
    truncate(path)
    result = run(rebuild, project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert path.read_bytes() == recorded
    assert f"Running stage '{producer}'" in result.stdout and result.stdout.count("Running stage") == 1


def test_the_command_for_a_missing_output_produces_it(project: Path) -> None:
    path = project / PARTITION
    recorded = path.read_bytes()
    path.unlink()
    (produce,) = refused(project, ["pretrain_fl", "simsiam-cnn", "fl-label", "fedavg"], PARTITION)
    assert produce == "dvc repro dvc.yaml:partitions"
    result = run(produce, project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert path.read_bytes() == recorded

"""Bad input is refused before any computation, with exit 2 and one line saying what is wrong and what
to do: a duplicate key or a byte that is not UTF-8 in a params file, a stage argument that names no
stage, a stage run from a subfolder of the project, a second `dssl repro` while the first holds the
project's DVC lock. Each case injects the fault for real and checks that nothing was written."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from dssl.cli import EXIT_BAD_INPUT, main

REPO = Path(__file__).resolve().parents[2]


def one_line(capsys) -> str:
    """The command's stderr, which must be exactly one line."""
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.fixture
def stage_env(monkeypatch):
    """Every stage in this process (no warm server), logging nowhere unless a stage really runs."""
    monkeypatch.setenv("DSSL_WARM", "0")
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture
def ci_project(make_project, monkeypatch, stage_env) -> Path:
    root = make_project("configs/ci.yaml")
    monkeypatch.chdir(root)
    return root


def files_of(root: Path) -> dict[str, int]:
    """Every file of the project with its modification time: what a refused command must leave alone."""
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns for p in root.rglob("*")
            if p.is_file() and ".git/" not in p.as_posix()}


def test_a_duplicate_key_is_refused_with_its_key_path_and_lines(tmp_path, capsys) -> None:
    text = (REPO / "params.yaml").read_text()
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("seeds:"))
    params = tmp_path / "params.yaml"
    params.write_text(text + f"{lines[first]}\n")   # the same top-level key again, at the end
    assert main(["validate", str(params)]) == EXIT_BAD_INPUT
    err = one_line(capsys)
    assert f"seeds: named twice, at line {first + 1} and line {len(lines) + 1}" in err, err

    nested = tmp_path / "nested.yaml"   # a key repeated inside a section names its whole path
    nested.write_text("a:\n  b:\n    k: 1\n    k: 2\n")
    assert main(["validate", str(nested)]) == EXIT_BAD_INPUT
    assert "a.b.k: named twice, at line 3 and line 4" in one_line(capsys)


def test_a_params_file_that_is_not_utf8_names_the_byte_offset(tmp_path, capsys) -> None:
    raw = (REPO / "params.yaml").read_bytes()
    params = tmp_path / "latin1.yaml"
    params.write_bytes(raw + "# caf\u00e9\n".encode("latin-1"))
    assert main(["validate", str(params)]) == EXIT_BAD_INPUT
    err = one_line(capsys)
    assert f"byte 0xe9 at byte offset {len(raw) + 5}" in err and str(params) in err, err


def test_a_stage_argument_naming_no_stage_lists_the_closest(ci_project: Path, capsys) -> None:
    before = files_of(ci_project)
    assert main(["evaluate_fl", "simsiam-cnn", "fl-label", "fedavgg"]) == EXIT_BAD_INPUT
    err = one_line(capsys)
    assert "evaluate_fl@simsiam-cnn-fl-label-fedavgg: params.yaml defines no such stage" in err, err
    assert "the closest: simsiam-cnn-fl-label-fedavg" in err
    assert files_of(ci_project) == before


def test_a_stage_run_from_a_subfolder_says_to_run_it_from_the_project_root(ci_project: Path, monkeypatch,
                                                                          capsys) -> None:
    before = files_of(ci_project)
    monkeypatch.chdir(ci_project / "configs")
    assert main(["prepare", "digits", "--params", "../params.yaml"]) == EXIT_BAD_INPUT
    err = one_line(capsys)
    assert "writes only into the project root" in err and "(`cd .. && dssl prepare digits --params params.yaml`)" in err
    assert main(["prepare", "digits"]) == EXIT_BAD_INPUT   # params.yaml is the project's, one folder up
    assert "no such params file  (hint: run from the project root: cd ..)" in one_line(capsys)
    assert files_of(ci_project) == before


def test_a_second_repro_names_the_pid_of_the_first(ci_project: Path, capsys) -> None:
    """The first run holds DVC's lock of the project (as `dssl repro` does from start to end): the second
    stops at once, before any stage, naming that process."""
    lock = ci_project / ".dvc" / "tmp" / "lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time, zc.lockfile\n"
                               f"lock = zc.lockfile.LockFile({str(lock)!r})\nprint('held', flush=True)\n"
                               "time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = files_of(ci_project)
        started = time.monotonic()
        assert main(["repro", "--jobs", "1"]) == EXIT_BAD_INPUT
        err = one_line(capsys)
    finally:
        holder.kill()
        holder.wait()
    assert f"(PID {holder.pid})" in err and f"kill {holder.pid}" in err, err
    assert time.monotonic() - started < 30
    assert not (ci_project / "data").exists()
    assert {k: v for k, v in files_of(ci_project).items() if not k.startswith(".dvc/")} == \
        {k: v for k, v in before.items() if not k.startswith(".dvc/")}

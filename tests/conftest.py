"""Shared test fixtures."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
import yaml

from dssl.config.params import read_params, validate
from dssl.pipeline.dvcfile import write_files

REPO = Path(__file__).resolve().parents[1]

# The shared CI-profile runs (ci_dvc_run, ci_local_run) and the slurm fixture, for every test module.
pytest_plugins = ("ci_runs",)


# a Python traceback up to its exception line, or a line a command prints for its error
_ERRORS = re.compile(r"^Traceback \(most recent call last\):\n(?:[ \t].*\n)*.*$|^(?:error|ERROR)\b.*$", re.MULTILINE)


def command_failure(cmd: list[str], result: subprocess.CompletedProcess, tail: int = 4000) -> str:
    """What a failed command printed, for an assertion message: first its errors (the tracebacks and
    error lines of its stages, which Snakemake's long listing of the failed jobs pushes out of the end of
    its output), then the ends of its stdout and stderr."""
    errors = "\n".join(dict.fromkeys(m.group(0) for m in _ERRORS.finditer(result.stdout + "\n" + result.stderr)))
    return (f"{' '.join(cmd)} failed (exit {result.returncode}):\n--- errors ---\n{errors[-tail:] or '(none printed)'}"
            f"\n--- stdout ---\n{result.stdout[-tail:]}\n--- stderr ---\n{result.stderr[-tail:]}")


def set_at(params: dict, where: str, value: object) -> None:
    """Set the dotted key path ``where`` of a params mapping to ``value``, creating missing sections."""
    *parents, key = where.split(".")
    for part in parents:
        params = params.setdefault(part, {})
    params[key] = value


@pytest.fixture
def good() -> dict:
    """params.yaml as read, less the verdict records of other runs (their paths are relative to the repository)."""
    params = read_params(REPO / "params.yaml")
    params["report"].pop("verdicts_elsewhere", None)
    return params


def problems_at(params: dict) -> dict[str, str]:
    """The validator's problems with ``params``, each line by its key path."""
    return {p.path: str(p) for p in validate(params, REPO)}


def validate_error_lines(params: dict, folder: Path) -> list[str]:
    """``dssl validate`` run as a user runs it on ``params`` written to ``folder``: it must exit 2 without a
    traceback; its non-blank stderr lines (one per problem)."""
    bad = folder / "params.yaml"
    bad.write_text(yaml.safe_dump(params))
    run = subprocess.run([sys.executable, "-m", "dssl.cli", "validate", str(bad)], cwd=folder,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    return [line for line in run.stderr.splitlines() if line.strip()]


def copy_project(target: Path, params_file: str = "params.yaml") -> Path:
    """A scratch DVC+git project with this repo's DAG, sources and the given params file."""
    for item in ("Snakefile", ".dvcignore", ".gitignore", "configs", "profiles"):
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, target / item)
    (target / ".dvc").mkdir()
    shutil.copy(REPO / ".dvc" / "config", target / ".dvc" / "config")  # not the cache: a fresh project
    shutil.copytree(REPO / ".dvc" / "plots", target / ".dvc" / "plots")  # the plot templates dvc.yaml names
    shutil.copytree(REPO / "src", target / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(REPO / params_file, target / "params.yaml")
    if (REPO / "reports" / "verdicts").is_dir():   # the verdict records report.verdicts_elsewhere may list
        shutil.copytree(REPO / "reports" / "verdicts", target / "reports" / "verdicts")
    # the dvc.yaml files are rendered for the params file in use, as `make repro` does (`dssl dag write`).
    write_files(read_params(target / "params.yaml"), target)
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    return target


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[[str], Path]:
    return lambda params_file="params.yaml": copy_project(tmp_path, params_file)


@pytest.fixture
def single_thread():
    """One intra-op thread: faster for tiny models on a busy 2-core machine (two threads spin)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny_dataset():
    """The linear theory's data: N=2 clients, d=16, small enough for gradient descent, big enough for a
    clear eigen-gap. (One conftest for the whole suite: the tests import ``copy_project`` from it by
    module name, which a second conftest.py would shadow.)"""
    from dssl.theory.data_model import SampleSizes, generate_dataset

    return generate_dataset(16, 2, seed=0, sizes=SampleSizes(n_frequent=24, n_rare=4))

"""A kill -9 of `dssl repro` at a seeded moment while a training stage runs, then `dssl repro` again: DVC
reports nothing to do, no process of the killed run lives on, and every result file equals the session's
uninterrupted run (``ci_runs.ci_dvc_run``, ``ci_runs.results``).

The run goes as `make repro` runs it: 2 stages at once through the warm stage server, whose stages run in
processes of their own sessions, so the kill of the run's process group reaches them only through the
server (a stage whose ``dssl`` caller died is killed too: ``dssl.pipeline.warm``)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ci_runs import results, run, warm_env, warm_stage_server
from conftest import copy_project

SEED = 53
KILL_WINDOW_S = (0.0, 3.0)   # after the first training stage's first checkpoint, then as soon as one runs


def _training_started(root: Path) -> bool:
    """A training or evaluation stage has written its first checkpoint (``checkpoints/<stage>/``)."""
    folder = root / "checkpoints"
    return folder.is_dir() and any(folder.iterdir())


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _processes_in(root: Path) -> set[int]:
    """The processes whose working folder is ``root`` (the server, its stages and their workers)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")) == root:
                    found.add(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.slow
def test_a_kill_9_of_repro_then_repro_ends_clean_with_the_same_results(ci_dvc_run: Path, tmp_path: Path) -> None:
    root = tmp_path / "ci"
    root.mkdir()
    copy_project(root, "configs/ci.yaml")
    root = root.resolve()
    env = warm_env()
    with warm_stage_server(root, env):
        server = int((root / ".dssl-warm.pid").read_text())
        log = open(tmp_path / "killed.log", "w")
        process = subprocess.Popen(["dssl", "repro", "--jobs", "2"], cwd=root, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 600
        while not _training_started(root):
            assert process.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(random.Random(SEED).uniform(*KILL_WINDOW_S))
        while not _training_started(root):   # the next moment a training stage runs (between two, none may)
            assert process.poll() is None, "the run ended before the kill"
            time.sleep(0.01)
        running = _processes_in(root) - {server}   # the run's commands, the server's stages and their workers
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + 3
        while any(map(_alive, running)) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = {pid: _command(pid) for pid in running if _alive(pid)}
        assert not alive, f"processes of the killed run live on: {alive}"
        run(["dssl", "repro", "--jobs", "2"], root, env)
    assert run(["dvc", "status"], root).strip().splitlines()[-1] == "Data and pipelines are up to date."
    ours, reference = results(root), results(ci_dvc_run)
    assert sorted(ours) == sorted(reference)
    for name in reference:
        assert ours[name] == reference[name], name

"""Workers die with their stage, and a stage removes what killed writers left half-written.

A stage's main process killed with SIGKILL (no handler runs) must take its forked workers with it, both
kinds: a stage's seed workers (``pipeline.workers``) and a round's client workers (``federation.parallel``);
an orphan would train on into the dead stage's temporary output and block forever. A rerun then removes
the dead stage's temporary folder and checkpoint files and ends with the same bits as a run never killed.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ci_runs import clean_env, run
from conftest import copy_project

from dssl.orphans import process_start, remove_dead_temporaries, temporary_pid

CELL = ("simsiam-cnn", "fl-iid", "fedavg")
OUTPUT = Path("models/fl/simsiam-cnn/fl-iid/fedavg")
CHECKPOINTS = Path("checkpoints") / f"pretrain_fl@{'-'.join(CELL)}"
GONE_WITHIN_S = 5.0
WORKER_ENVS = {"client-workers": {"DSSL_CLIENT_WORKERS": "2", "DSSL_WORKERS": "1"},
               "seed-workers": {"DSSL_CLIENT_WORKERS": "1", "DSSL_WORKERS": "2"}}
MOMENT_SEEDS = {"client-workers": 0, "seed-workers": 1}   # when, after the workers start, the kill comes


def state(pid: int) -> str | None:
    """A process's state letter from /proc (None: no such process); a zombie (Z) has ended."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def running(pid: int) -> bool:
    return state(pid) not in (None, "Z", "X")


def children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.02)
    return value


def assert_gone(workers: list[int], what: str) -> None:
    """Every one of ``workers`` ends within ``GONE_WITHIN_S``; survivors are killed after a failure, so that
    a broken build leaves no orphan behind either."""
    try:
        wait_for(lambda: not any(running(pid) for pid in workers), GONE_WITHIN_S,
                 f"{what}: {[pid for pid in workers if running(pid)]} still running after {GONE_WITHIN_S} s")
    finally:
        for pid in workers:
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def temporaries(root: Path) -> list[Path]:
    return [p for folder in ("models", "checkpoints") for p in (root / folder).rglob(".*") if temporary_pid(p)]


def output_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root / OUTPUT)): p.read_bytes() for p in sorted((root / OUTPUT).rglob("*"))
            if p.is_file()}


def stage_env(workers: str) -> dict[str, str]:
    return clean_env(**WORKER_ENVS[workers])


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The CI project with its data prepared and split, and the reference: the stage run once, unkilled."""
    root = copy_project(tmp_path_factory.mktemp("faults"), "configs/ci.yaml")
    env = clean_env(DSSL_WORKERS="1")
    for command in (["prepare", "digits"], ["partitions"], ["pretrain_fl", *CELL]):
        run(["dssl", *command], root, env)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("workers", sorted(WORKER_ENVS))
def test_a_stage_killed_with_sigkill_takes_its_workers_and_its_rerun_ends_clean(project, workers):
    reference = output_files(project)
    shutil.rmtree(project / OUTPUT)
    log = project.parent / f"killed-{workers}.log"
    with open(log, "w") as out:
        stage = subprocess.Popen(["dssl", "pretrain_fl", *CELL], cwd=project, env=stage_env(workers), stdout=out,
                                 stderr=subprocess.STDOUT)
    try:
        workers_seen = wait_for(lambda: len(children(stage.pid)) >= 2 and children(stage.pid), 120,
                                f"the stage never started 2 workers:\n{log.read_text()[-3000:]}")
        time.sleep(random.Random(MOMENT_SEEDS[workers]).uniform(0.0, 0.4))   # a seeded moment while they train
        alive = [pid for pid in children(stage.pid) if running(pid)]
        stage.kill()
    finally:
        stage.kill()
        stage.wait()
    assert alive, f"no worker left to orphan (workers {workers_seen} ended before the kill)"
    assert_gone(alive, "workers outlived their stage")
    left = temporaries(project)
    assert any(temporary_pid(p) == stage.pid for p in left), f"the killed stage left no temporary output: {left}"

    run(["dssl", "pretrain_fl", *CELL], project, stage_env(workers))
    assert temporaries(project) == [] and not (project / CHECKPOINTS).exists()
    assert output_files(project) == reference   # weights and history.json, byte for byte


def _killed_in(block) -> int:
    """The pid of a forked process that ran ``block()`` and was killed with SIGKILL inside it."""
    pid = os.fork()
    if pid == 0:   # pragma: no cover - the child
        try:
            block()
        finally:
            os._exit(1)   # block() did not kill it: the waiting test sees exit code 1
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    return pid


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_new_output_replaces_what_a_killed_writer_left_and_keeps_a_live_writers(tmp_path: Path) -> None:
    from dssl.pipeline.common import atomic_dir, atomic_file

    def half_written_dir() -> None:
        with atomic_dir(tmp_path / "cell") as tmp:
            (tmp / "seed-0").mkdir()
            _die()

    def half_written_file() -> None:
        with atomic_file(tmp_path / "graph.json") as tmp:
            tmp.write_text("{")
            _die()

    dead = [_killed_in(half_written_dir), _killed_in(half_written_file)]
    assert sorted(temporary_pid(p) for p in tmp_path.iterdir()) == sorted(dead)
    live = tmp_path / f".cell.tmp-{os.getppid()}"   # another run writing the same output, alive
    live.mkdir()
    with atomic_dir(tmp_path / "cell") as tmp:
        (tmp / "seed-0").mkdir()
    with atomic_file(tmp_path / "graph.json") as tmp:
        tmp.write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["cell", "graph.json", live.name])


def test_a_killed_checkpoint_write_is_removed_and_a_reused_pid_is_no_live_writer(tmp_path: Path) -> None:
    import torch

    from dssl.federation.checkpoint import save_checkpoint

    folder = tmp_path / "seed-0"

    def killed_before_the_rename() -> None:
        os.replace = lambda *_: _die()
        save_checkpoint(folder, {"completed_rounds": 1, "global_states": [{"w": torch.zeros(2)}]})

    dead = _killed_in(killed_before_the_rename)
    (left,) = [p for p in folder.iterdir()]
    assert temporary_pid(left) == dead
    # a temporary named after this process, but older than it: the pid was reused since its writer died
    reused = folder / f".checkpoint.pt.{os.getpid()}.tmp"
    reused.write_bytes(b"")
    before = process_start(os.getpid()) - 60
    os.utime(reused, (before, before))
    assert remove_dead_temporaries(tmp_path, recursive=True) == sorted([left, reused])
    assert list(folder.iterdir()) == []


WORKER_SCRIPT = """
import sys, time
from dssl.pipeline.workers import run_tasks
print("ready", flush=True)
run_tasks(time.sleep, [120.0, 120.0])
"""

CLIENT_SCRIPT = """
import time
from dssl.federation.parallel import ClientTask, ClientWorkers

class Strategy:
    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass

def train(task, round_states, local_state):
    time.sleep(120)

with ClientWorkers(train, Strategy(), 2) as workers:
    print("ready", flush=True)
    workers.train([ClientTask(0, 0, 0), ClientTask(1, 0, 0)], [], [{}, {}], lambda *_: None)
"""


@pytest.mark.parametrize("script", [WORKER_SCRIPT, CLIENT_SCRIPT], ids=["seed-workers", "client-workers"])
def test_busy_workers_end_with_the_process_that_forked_them(script: str) -> None:
    env = {**os.environ, "DSSL_WORKERS": "2", "DSSL_CLIENT_WORKERS": "1"}
    parent = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        workers = wait_for(lambda: len(children(parent.pid)) >= 2 and children(parent.pid), 60, "no workers")
        wait_for(lambda: all(running(pid) for pid in workers), 10, "the workers did not start")
    finally:
        parent.kill()
        parent.wait()
    assert_gone(workers, "workers outlived the process that forked them")

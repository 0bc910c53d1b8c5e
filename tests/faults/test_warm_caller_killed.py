"""A stage run by the warm stage server dies with the ``dssl`` command that asked for it: kill -9 of that
command (of `dssl repro`'s process group, say) ends the stage too, within a second, as it would a stage
running in that process group; else it trained on unseen and wrote its outputs behind the rerun's back."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from dssl.pipeline import warm


def _serve(root: Path) -> None:
    warm.HEAVY_MODULES = ()   # nothing to pre-import for a stand-in command

    def stand_in(argv: list[str]) -> int:   # a stage that runs for a minute
        time.sleep(60)
        return 0

    warm.serve(root, stand_in)


def _ask(root: Path) -> None:
    os.chdir(root)
    os.environ.pop("DSSL_WARM", None)
    os._exit(warm.try_delegate(["stand-in"], root) or 0)


@pytest.fixture
def server(tmp_path: Path):
    process = multiprocessing.get_context("fork").Process(target=_serve, args=(tmp_path,), daemon=True)
    process.start()
    deadline = time.monotonic() + 30
    while not warm.socket_path(tmp_path).exists():
        assert time.monotonic() < deadline and process.is_alive(), "the server did not start"
        time.sleep(0.05)
    yield tmp_path, process.pid
    process.kill()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
        except (OSError, IndexError):   # a process that ended meanwhile
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_stage_dies_with_its_killed_caller(server: tuple[Path, int]) -> None:
    root, server_pid = server
    caller = multiprocessing.get_context("fork").Process(target=_ask, args=(root,))
    caller.start()
    deadline = time.monotonic() + 30
    stages: list[int] = []
    while not stages:
        assert time.monotonic() < deadline, "the server started no stage"
        stages = [stage for waiter in _children(server_pid) for stage in _children(waiter)]
        time.sleep(0.05)
    os.kill(caller.pid, signal.SIGKILL)
    caller.join()
    deadline = time.monotonic() + 3
    while any(map(_alive, stages)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, stages)), "the stage trains on after its caller was killed"
    while any(map(_alive, _children(server_pid))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, _children(server_pid))), "the stage's waiter lives on"
    assert warm.socket_path(root).exists(), "the waiter took the server's socket with it"

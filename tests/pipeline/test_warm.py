"""The warm stage server's client: a command whose process in the server dies without an exit status
fails with an error that says so, instead of a bare exit status 1; and a stage run by the server dies with
the ``dssl`` command that asked for it (kill -9 of that command, of `dssl repro`'s process group, say),
else it trained on unseen and wrote its outputs behind the rerun's back."""

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

    def stand_in(argv: list[str]) -> int:   # a stage that runs until it is stopped
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


def test_a_killed_waiter_gives_an_error_naming_the_command(server: tuple[Path, int], capfd, monkeypatch) -> None:
    root, server_pid = server
    monkeypatch.chdir(root)

    def kill_the_waiter(signum, frame) -> None:   # the server forks a waiter, which forks the stage
        for waiter in _children(server_pid):
            stages = _children(waiter)
            os.kill(waiter, signal.SIGKILL)
            for stage in stages:
                os.kill(stage, signal.SIGKILL)

    signal.signal(signal.SIGALRM, kill_the_waiter)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        status = warm.try_delegate(["pretrain_fl", "a", "b", "c"], root)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)
    assert status == 1
    error = capfd.readouterr().err
    assert "`dssl pretrain_fl a b c`" in error and "ended without reporting its exit status" in error


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

"""Faults injected for real for the fault tests: a small tmpfs (a full disk), a read-only bind mount (a
read-only folder; root ignores permission bits, so chmod would not do), a port that never answers, and the
CI project the stages run in. A test that cannot inject its fault (mounting is not permitted) is skipped
with the reason."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from conftest import copy_project

from dssl.cli import main

TEMPORARY_MARKERS = (".tmp", ".tmp-")


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` on a tmpfs of ``size`` bytes (``64k``): writes past it fail with ENOSPC."""
    folder.mkdir(parents=True, exist_ok=True)
    result = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
    if result.returncode:
        pytest.skip(f"cannot mount a tmpfs for a full disk ({result.stderr.strip() or 'mount failed'})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """``folder`` bind-mounted read-only onto itself: writes fail with EROFS, for root too."""
    folder.mkdir(parents=True, exist_ok=True)
    result = _mount("--bind", str(folder), str(folder))
    if result.returncode:
        pytest.skip(f"cannot bind-mount a folder read-only ({result.stderr.strip() or 'mount failed'})")
    try:
        remount = _mount("-o", "remount,bind,ro", str(folder))
        if remount.returncode:
            pytest.skip(f"cannot remount a folder read-only ({remount.stderr.strip()})")
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@contextmanager
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections (the kernel's backlog) but never answers a request."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound once, then released): a connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def temporaries(root: Path) -> list[Path]:
    """Temporary files and folders of the atomic writers left anywhere under ``root``."""
    return [p for p in root.rglob(".*") if any(marker in p.name for marker in TEMPORARY_MARKERS)]


def environment(patch: pytest.MonkeyPatch, root: Path) -> None:
    """Stages run in this process, in ``root``, one worker, with the project's own SQLite store."""
    patch.chdir(root)
    patch.setenv("DSSL_WARM", "0")
    patch.setenv("DSSL_WORKERS", "1")
    patch.delenv("DVC_ROOT", raising=False)
    patch.delenv("MLFLOW_TRACKING_URI", raising=False)


def prepared_project(folder: Path) -> Path:
    """The CI project with its digits prepared and its partitions written."""
    root = copy_project(folder, "configs/ci.yaml")
    with pytest.MonkeyPatch.context() as patch:
        environment(patch, root)
        assert main(["prepare", "digits"]) == 0
        assert main(["partitions"]) == 0
    return root


def copy_of(prepared: Path, target: Path, patch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(prepared, target)
    environment(patch, target)
    return target


def edit_params(root: Path, change) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    change(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def error_lines(err: str) -> list[str]:
    """The lines a command printed to stderr, without progress bars and warnings of libraries."""
    return [line for line in err.splitlines() if line.strip() and not line.startswith(("WARNING", "  warnings"))]


def killed_after(root: Path, stage: list[str], checkpoints: int) -> None:
    """Run ``stage`` in a process of its own that hangs after its ``checkpoints``-th checkpoint; SIGKILL it."""
    marker = root / "paused"
    script = (
        "import sys, time, pathlib\n"
        "import dssl.federation.simulator as s\n"
        "from dssl.cli import main\n"
        "original, count = s.save_checkpoint, []\n"
        "def hang(directory, payload):\n"
        "    path = original(directory, payload)\n"
        "    count.append(1)\n"
        f"    if len(count) == {checkpoints}:\n"
        f"        pathlib.Path({str(marker)!r}).touch()\n"
        "        time.sleep(600)\n"
        "    return path\n"
        "s.save_checkpoint = hang\n"
        f"sys.exit(main({stage!r}))\n")
    env = {**os.environ, "DSSL_WARM": "0", "DSSL_WORKERS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    process = subprocess.Popen([sys.executable, "-c", script], cwd=root, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()

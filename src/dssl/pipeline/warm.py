"""A warm stage server: pay the heavy imports once per pipeline run, not once per stage.

Importing torch, timm, MLflow and seaborn costs several seconds, more than many small stages of the
embedded default compute. ``dssl warm start`` launches a server (``dssl warm serve``, which hands it
the CLI's ``main``) that imports them once and then *forks* one child per ``dssl`` command, so each
stage starts with everything loaded. The child gets the caller's working directory, environment and
terminal (stdin/stdout/stderr file descriptors are passed over the socket), so DVC and Snakemake see
exactly what a plain process would produce, and its exit status is returned to the caller.

Safety rules, each for a reason:
- The server never computes: forking a process whose thread pools have started is unsafe, and an
  imported-but-idle torch has none.
- Any change to the package's source files after the server started makes it refuse the request and
  exit, so a stage never runs stale code; the caller then runs the command itself.
- Without a server (or with DSSL_WARM=0) every command simply runs in its own process.
- A stage dies with its caller: killed (kill -9 included), the caller's connection closes and the stage's
  waiter kills the stage, as the kill of a process group would have killed a stage running in it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from pathlib import Path
from typing import Callable

SOCKET_NAME = ".dssl-warm.sock"
HEAVY_MODULES = (
    "torch", "torchvision", "timm", "numpy", "pandas", "matplotlib.pyplot", "seaborn", "mlflow", "networkx",
    "sklearn.datasets", "scipy.linalg",
    "mlflow.entities", "mlflow.store.tracking.sqlalchemy_store", "mlflow.store.tracking.sqlalchemy_workspace_store",
    "dssl.data.datasets", "dssl.data.partition", "dssl.methods", "dssl.models",
    "dssl.federation", "dssl.evaluation.linear_probe", "dssl.evaluation.finetune", "dssl.evaluation.knn",
    "dssl.evaluation.few_shot", "dssl.tracking", "dssl.topology.graphs", "dssl.pipeline.catalogue",
    "dssl.config.sections", "dssl.theory.sweep", "dssl.theory.theorems", "dssl.theory.improvement_study",
)
_HEADER = struct.Struct("!I")
CALLER_POLL_S = 0.5   # how often a waiter without a pidfd looks for its stage's end


def socket_path(root: Path) -> Path:
    return Path(root) / SOCKET_NAME


def _source_stamp() -> dict[str, float]:
    package = Path(__file__).resolve().parents[1]
    return {str(p): p.stat().st_mtime for p in package.rglob("*.py")}


# ---------------------------------------------------------------------------------------------- client


def try_delegate(argv: list[str], root: Path) -> int | None:
    """Run ``dssl argv`` in the warm server if one is up; None means 'run it yourself'."""
    if os.environ.get("DSSL_WARM", "1") == "0":
        return None
    path = socket_path(root)
    if not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        socket.send_fds(conn, [_HEADER.pack(len(request)) + request], [0, 1, 2])
        reply = _read_json(conn)
        if reply is None or "refused" in reply:
            return None
        child = int(reply["pid"])
        # the stage runs in the server's child: pass on what the caller gets (SIGUSR1: a scheduler's
        # "checkpoint and stop", dssl.training.preemption)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, lambda signum, _frame: os.kill(child, signum))
        done = _read_json(conn)
        if done is None:
            print(f"error: the warm stage server's process running `dssl {' '.join(argv)}` (pid {child}) "
                  "ended without reporting its exit status (killed?); run the command again, or without the "
                  "server (DSSL_WARM=0)", file=sys.stderr)
            return 1
        return int(done["status"])
    except OSError:
        return None
    finally:
        conn.close()


def _send_json(conn: socket.socket, payload: dict) -> None:
    data = json.dumps(payload).encode()
    conn.sendall(_HEADER.pack(len(data)) + data)


def _read_exact(conn: socket.socket, size: int) -> bytes | None:
    chunks = b""
    while len(chunks) < size:
        chunk = conn.recv(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return chunks


def _read_json(conn: socket.socket) -> dict | None:
    header = _read_exact(conn, _HEADER.size)
    if header is None:
        return None
    body = _read_exact(conn, _HEADER.unpack(header)[0])
    return json.loads(body) if body is not None else None


# ---------------------------------------------------------------------------------------------- server


def serve(root: Path, run: Callable[[list[str]], int]) -> None:
    """Import the heavy modules, then fork a child per request, which calls ``run(argv)`` (the CLI's
    ``main``), until stopped or the code changes."""
    import importlib

    for module in HEAVY_MODULES:
        importlib.import_module(module)
    stamp = _source_stamp()
    path = socket_path(root)
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    signal.signal(signal.SIGTERM, lambda *_: (path.unlink(missing_ok=True), os._exit(0)))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters are reaped automatically
    try:
        while True:
            conn, _ = server.accept()
            if _source_stamp() != stamp:
                _send_json(conn, {"refused": "source changed since the server started"})
                conn.close()
                break
            _handle(conn, server, run)
    finally:
        path.unlink(missing_ok=True)


def _handle(conn: socket.socket, server: socket.socket, run: Callable[[list[str]], int]) -> None:
    header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
    size = _HEADER.unpack(header)[0]
    request = json.loads(_read_exact(conn, size))
    # Fork twice so the stage's parent is a small waiter, and the server never blocks on a stage.
    if os.fork() != 0:
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    server.close()
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this waiter reaps its stage itself
    child = os.fork()
    if child == 0:
        conn.close()
        _become_stage(request, fds, run)
    for fd in fds:
        os.close(fd)
    try:   # a forked copy of the server: nothing may return into its loop, whatever happens here
        _tell(conn, {"pid": child})
        code = os.waitstatus_to_exitcode(_wait_for_stage(child, conn))
        _tell(conn, {"status": code if code >= 0 else 128 - code})
    finally:
        os._exit(0)


def _tell(conn: socket.socket, payload: dict) -> None:
    """Send to the caller, if it is still there (a killed caller is no one to tell)."""
    try:
        _send_json(conn, payload)
    except OSError:
        pass


def _wait_for_stage(child: int, conn: socket.socket) -> int:
    """The stage's wait status. Its caller sends nothing after its request, so the connection closing
    first means the caller is gone (kill -9 of `dssl repro`'s process group): the stage, in a session of
    its own, is then killed as the caller was, so that nothing of a killed run trains on unseen and writes
    its outputs behind the rerun's back (its workers die with it, ``dssl.orphans``). Both ends are
    watched at once (a pidfd of the stage; where there is none, its end is polled)."""
    import select

    try:
        ended: int | None = os.pidfd_open(child)
    except (AttributeError, OSError):
        ended = None
    try:
        while True:
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                return status
            watched = [conn] if ended is None else [conn, ended]
            readable, _, _ = select.select(watched, [], [], CALLER_POLL_S if ended is None else None)
            if conn in readable and not _received(conn):
                os.kill(child, signal.SIGKILL)
                return os.waitpid(child, 0)[1]
    finally:
        if ended is not None:
            os.close(ended)


def _received(conn: socket.socket) -> bytes:
    """What the caller sent (nothing is expected: b'' when it is gone, its connection closed or reset)."""
    try:
        return conn.recv(4096)
    except OSError:
        return b""


def _become_stage(request: dict, fds: list[int], run: Callable[[list[str]], int]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", closefd=False, buffering=1)
    sys.stderr = open(2, "w", closefd=False, buffering=1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ["DSSL_WARM"] = "0"  # the child runs the command itself
    code = 1
    try:
        code = run(request["argv"])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - report like a normal process would, then exit
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def launch(root: Path, command: list[str]):
    """Start the server in the background with ``command`` (the CLI's ``warm serve``), replacing a
    running one; returns its process."""
    import subprocess

    if socket_path(root).exists():
        stop(root)
    log = open(Path(root) / ".dssl-warm.log", "w")
    process = subprocess.Popen(
        command, cwd=root, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        env={**os.environ, "DSSL_WARM": "0"},
    )
    (Path(root) / ".dssl-warm.pid").write_text(str(process.pid))
    return process


def wait_ready(root: Path, process, timeout_s: float = 120) -> int:
    """Block until the server listens; returns its pid."""
    import time

    deadline = time.monotonic() + timeout_s
    while not socket_path(root).exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the warm server did not start; see {Path(root) / '.dssl-warm.log'}")
        time.sleep(0.1)
    return process.pid


def stop(root: Path) -> bool:
    """Stop the server if one runs; True when one was stopped."""
    pid_file = Path(root) / ".dssl-warm.pid"
    stopped = False
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
            stopped = True
        except (ProcessLookupError, ValueError):
            pass
        pid_file.unlink(missing_ok=True)
    socket_path(root).unlink(missing_ok=True)
    return stopped

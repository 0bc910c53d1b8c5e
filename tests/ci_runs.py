"""The CI profile's runs the slow tests share, and the helpers around them (commands in a clean
environment, the tracking server as a background process, a single-node SLURM).

Each whole run of the CI profile is made once per test session, by the first test that needs it (under
pytest-xdist the other workers wait for it: a file lock in the session's shared temporary folder, the
result pickled beside it), and is read-only to the tests; a test that changes a project works on a copy
(``copy_run``):

- ``ci_dvc_run``: `dssl repro` (DVC's reproduce, 2 stages at once) through the warm stage server, as
  `make repro` runs it, with the project's own SQLite tracking store, committed to git (the end-to-end
  and lineage tests);
- ``ci_local_run``: Snakemake with 2 parallel jobs through the warm stage server, as `make snakemake` runs
  it, each FL / DecL round's clients trained in 2 worker processes, logging to a real tracking server
  (`dssl tracking serve`: PostgreSQL + artifact folder), then recorded by DVC and committed (the cluster
  tests' reference, and the proof that Snakemake gives the bits of DVC's reproduce). The cluster tests'
  SLURM jobs run their stages cold, each in a process of its own as on a cluster node, and must give
  this run's bits: so warm and cold stages are compared there. (Cold, with the SQLite store, the 34
  stages took 133-135 s on 2 cores against 46-52 s warm: each cold stage imports torch and MLflow.)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import command_failure, copy_project
from services import LocalSlurm, ensure_installed, free_port

BIN = Path(sys.executable).parent
GIT_IDENTITY = ["-c", "user.name=dssl tests", "-c", "user.email=tests@dssl.invalid"]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a fresh shell with the venv first on PATH and no tracking/engine leftovers."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_TRACKING_URI", "DSSL_ENGINE", "DVC_STAGE", "DVC_ROOT") and not k.startswith("SLURM_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    env["DSSL_WARM"] = "0"  # every stage in its own process, as on a cluster node
    return {**env, **extra}


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    result = subprocess.run(cmd, cwd=cwd, env=env or clean_env(), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, command_failure(cmd, result)
    return result.stdout + result.stderr


def git_commit(root: Path, message: str) -> None:
    run(["git", "add", "-A"], root)
    run(["git", *GIT_IDENTITY, "commit", "-q", "-m", message], root)


def results(root: Path) -> dict[str, dict]:
    """Every result file of a run, whole: it holds no MLflow run id (its run is named after it)."""
    return {str(p.relative_to(root)): json.loads(p.read_text())
            for p in sorted((root / "reports/metrics").rglob("*.json"))}


class TrackingServer:
    """`dssl tracking serve` with a private PostgreSQL, as a background process of the test."""

    def __init__(self, cwd: Path) -> None:
        # PostgreSQL runs as the postgres user when we are root: its folder's parents must be searchable.
        self.folder = Path(tempfile.mkdtemp(prefix="dssl-tracking-"))
        self.folder.chmod(0o755)
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log = self.folder / "server.log"
        self.command = ["dssl", "tracking", "serve", "--postgres", str(self.folder / "postgres"),
                        "--postgres-port", str(free_port()), "--artifacts", str(self.folder / "artifacts"),
                        "--port", str(self.port)]
        self.cwd = cwd
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        from dssl.tracking.server import wait_until_healthy

        with open(self.log, "w") as log:
            self.process = subprocess.Popen(self.command, cwd=self.cwd, env=clean_env(), stdout=log,
                                            stderr=subprocess.STDOUT)
        try:
            wait_until_healthy(self.uri, self.process, timeout=300)
        except Exception as err:
            raise RuntimeError(f"{err}\n{self.log.read_text()[-4000:]}") from err

    def stop(self) -> int:
        """SIGTERM, as a user's Ctrl-C: MLflow and then PostgreSQL stop; returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


@dataclass
class LocalRun:
    root: Path                 # the scratch project: outputs, dvc.lock recorded, all committed to git
    runs: list[dict]           # the tracking server's runs: run_name, stage, seed, run_id
    expected_stages: set[str]  # every stage of the DAG
    artifacts: Path            # the server's artifact folder
    server_exit: int
    postgres_running_after: bool
    dvc_status_after_commit: str  # `dvc status --json` once `dvc commit -f` recorded the outputs


def make_local_run(root: Path) -> LocalRun:
    """The CI profile by Snakemake (warm stage server) against a fresh tracking server, then `dvc commit -f`
    and a git commit."""
    from dssl.pipeline.dag import dvc_stages
    from dssl.tracking import stage_runs

    copy_project(root, "configs/ci.yaml")
    server = TrackingServer(root)
    server.start()
    env = warm_env(MLFLOW_TRACKING_URI=server.uri, DSSL_CLIENT_WORKERS="2")
    try:
        with warm_stage_server(root, env):
            run(["snakemake", "--cores", "2", "--quiet", "all"], root, env)
        os.environ["MLFLOW_TRACKING_URI"] = server.uri
        try:
            frame = stage_runs(root, "ci")
        finally:
            del os.environ["MLFLOW_TRACKING_URI"]
    finally:
        code = server.stop()
    postgres_alive = (server.folder / "postgres" / "data" / "postmaster.pid").exists()
    runs = [{"run_name": r["run_name"], "stage": r["stage"], "seed": r.get("tags.seed"), "run_id": r["run_id"],
             "engine": r.get("tags.engine")} for _, r in frame.iterrows()]
    run(["dvc", "commit", "-f"], root)
    left = run(["dvc", "status", "--json"], root).strip().splitlines()[-1]
    git_commit(root, "CI profile run by Snakemake, recorded by DVC")
    dag, _ = dvc_stages(root)
    return LocalRun(root, runs, {s.name for s in dag}, server.folder / "artifacts", code, postgres_alive, left)


def make_dvc_run(root: Path) -> Path:
    """The CI profile by `dssl repro --jobs 2` through the warm stage server, committed to git."""
    copy_project(root, "configs/ci.yaml")
    env = warm_env()
    with warm_stage_server(root, env):
        run(["dssl", "repro", "--jobs", "2"], root, env)
    git_commit(root, "CI profile run by dssl repro")
    return root


def warm_env(**extra: str) -> dict[str, str]:
    """``clean_env`` with the warm stage server allowed (as `make repro` runs)."""
    env = clean_env(**extra)
    env.pop("DSSL_WARM")
    return env


@contextlib.contextmanager
def warm_stage_server(root: Path, env: dict[str, str]):
    """`dssl warm start` in ``root`` for the block (its stages fork from the server), `dssl warm stop` after."""
    run(["dssl", "warm", "start"], root, env)
    try:
        yield
    finally:
        run(["dssl", "warm", "stop"], root, env)


def copy_run(run_root: Path, target: Path) -> Path:
    """A copy of a shared run that a test may change (its git history, DVC cache and tracking store too)."""
    shutil.copytree(run_root, target, symlinks=True)
    return target


def shared_once(tmp_path_factory, name: str, make):
    """``make(folder)``'s result, made once per test session in ``<session tmp>/<name>`` and shared by the
    xdist workers; a failure is reported to every test that asks again."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root, done, failed = shared / name, shared / f"{name}.pickle", shared / f"{name}.failed"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            pytest.fail(f"the shared run {name} failed in another test:\n{failed.read_text()}")
        if not done.exists():
            root.mkdir()
            try:
                done.write_bytes(pickle.dumps(make(root)))
            except BaseException as err:
                failed.write_text(f"{type(err).__name__}: {err}"[-5000:])
                raise
        return pickle.loads(done.read_bytes())


def _postgres_missing() -> str | None:
    """None when PostgreSQL's server programs are present (installed here as root if needed)."""
    from dssl.tracking.server import ServerError, postgres_bin

    try:
        postgres_bin("initdb")
        return None
    except ServerError:
        ensure_installed()
    try:
        postgres_bin("initdb")
        return None
    except ServerError as err:
        return f"PostgreSQL is missing and .ci/install-services could not install it: {err}"


@pytest.fixture(scope="session")
def ci_local_run(tmp_path_factory) -> LocalRun:
    """The CI profile by Snakemake against a tracking server, run once per test session."""
    reason = _postgres_missing()
    if reason:
        pytest.skip(reason)
    return shared_once(tmp_path_factory, "ci-local-run", make_local_run)


@pytest.fixture(scope="session")
def ci_dvc_run(tmp_path_factory) -> Path:
    """The CI profile by `dssl repro`, run once per test session (read-only: change a ``copy_run``)."""
    return shared_once(tmp_path_factory, "ci-dvc-run", make_dvc_run)


@pytest.fixture
def slurm():
    """A single-node SLURM for the test (one per machine at a time: a second test waits for the first)."""
    reason = ensure_installed()
    if reason:
        pytest.skip(reason)
    cluster = LocalSlurm()
    try:
        cluster.start()
    except FileExistsError as err:
        pytest.skip(str(err))
    try:
        yield cluster
    finally:
        cluster.stop()

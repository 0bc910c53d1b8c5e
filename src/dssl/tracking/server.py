"""An MLflow tracking server for runs on many nodes: PostgreSQL holds runs, a folder holds artifacts.

SQLite (the default store, `mlflow.db` in the project) serves one machine; it must not live on NFS and
every node would need the project's folder. On a cluster, one node runs ``dssl tracking serve`` and
every job logs over HTTP (``MLFLOW_TRACKING_URI=http://<host>:<port>``). The server proxies artifacts
(``--artifacts-destination``), so jobs need no access to the artifact folder.

The runs' store is either a PostgreSQL database the site provides (``--backend-store-uri``) or a
private PostgreSQL cluster in a folder (``--postgres DIR``: created with ``initdb`` on first use,
started before MLflow and stopped after it). PostgreSQL refuses to run as root: started by root, the
private cluster runs as the ``postgres`` system user, which then owns its folder.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

DATABASE = "mlflow"
POSTGRES_USER = "postgres"


class ServerError(RuntimeError):
    """The tracking server or its database could not be started."""


def postgres_bin(program: str) -> str:
    """Path of a PostgreSQL server program (Debian keeps them in /usr/lib/postgresql/<version>/bin)."""
    found = shutil.which(program)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{program}"),
                        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    if not candidates:
        raise ServerError(f"PostgreSQL's {program} not found: install it (Debian: `apt-get install postgresql`) "
                          "or pass --backend-store-uri of an existing database")
    return str(candidates[-1])


@dataclass
class PrivatePostgres:
    """A PostgreSQL cluster in ``folder`` listening on ``host:port``, with one database for MLflow.

    Its Unix socket lies in the folder too, so it never collides with a system-wide PostgreSQL.
    """

    folder: Path
    port: int
    host: str = "127.0.0.1"

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def uri(self) -> str:
        return f"postgresql://{self._user}@{self.host}:{self.port}/{DATABASE}"

    @property
    def _user(self) -> str:
        return POSTGRES_USER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name

    def _run(self, args: list[str], check: bool = True) -> subprocess.CompletedProcess:
        """Run a PostgreSQL program as the cluster's owner (the postgres user when we are root)."""
        user = POSTGRES_USER if os.geteuid() == 0 else None
        result = subprocess.run(args, user=user, capture_output=True, text=True, cwd=self.folder)
        if check and result.returncode != 0:
            raise ServerError(f"{' '.join(args)} failed:\n{result.stdout}{result.stderr}")
        return result

    def start(self) -> str:
        """initdb on first use, start the server, create the database once; returns the store URI."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            owner = pwd.getpwnam(POSTGRES_USER)
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
        if not (self.data / "PG_VERSION").exists():
            # trust on loopback and the folder's socket: the server listens on `host` only.
            self._run([postgres_bin("initdb"), "-D", str(self.data), "-U", self._user, "--auth=trust",
                       "--encoding=UTF8", "--locale=C"])
        options = f"-p {self.port} -k {self.folder} -h {self.host}"
        self._run([postgres_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "postgres.log"),
                   "-o", options, "-w", "-t", "60", "start"])
        exists = self._run([postgres_bin("psql"), "-h", str(self.folder), "-p", str(self.port), "-U", self._user,
                            "-d", "postgres", "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"])
        if exists.stdout.strip() != "1":
            self._run([postgres_bin("createdb"), "-h", str(self.folder), "-p", str(self.port), "-U", self._user,
                       DATABASE])
        return self.uri

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run([postgres_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"], check=False)


def wait_until_healthy(url: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Poll the server's /health endpoint until it answers OK (or the process died / time ran out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerError(f"the MLflow server exited with code {process.returncode} before it answered")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise ServerError(f"the MLflow server did not answer at {url}/health within {timeout:.0f} s")


def serve(artifacts: Path, host: str, port: int, backend_store_uri: str | None = None,
          postgres: Path | None = None, postgres_port: int = 5433, workers: int = 2) -> int:
    """Run the MLflow server in the foreground until SIGTERM/SIGINT; returns its exit code.

    Exactly one of ``backend_store_uri`` (an existing database) and ``postgres`` (a private cluster's
    folder) names the runs' store.
    """
    if (backend_store_uri is None) == (postgres is None):
        raise ServerError("give exactly one of --backend-store-uri URI and --postgres DIR")
    database = PrivatePostgres(postgres.resolve(), postgres_port) if postgres is not None else None
    uri = database.start() if database is not None else backend_store_uri
    artifacts = artifacts.resolve()
    artifacts.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri,
               "--artifacts-destination", str(artifacts), "--host", host, "--port", str(port),
               "--workers", str(workers)]
    process = subprocess.Popen(command)
    stopping = False

    def _stop(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
        nonlocal stopping
        stopping = True
        process.terminate()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
        wait_until_healthy(url, process)
        print(f"MLflow tracking server ready: export MLFLOW_TRACKING_URI={url}  (runs in {uri.split('@')[-1]}, "
              f"artifacts in {artifacts})", flush=True)
        code = process.wait()
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)
        if database is not None:
            database.stop()
    return 0 if stopping else code

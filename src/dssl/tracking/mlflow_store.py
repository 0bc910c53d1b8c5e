"""One MLflow store per project: SQLite at an absolute path inside the project, created once; or, on
a cluster, the tracking server MLFLOW_TRACKING_URI names (`dssl tracking serve`, server.py).

Creating a fresh SQLite store from several processes at once corrupts it, so creation (schema and
experiment) happens under an exclusive file lock; `dssl tracking init` does it before Snakemake
starts parallel jobs, and every stage re-checks under the same lock, so the order never matters.
A server creates its own schema; jobs on several nodes share no lock, so there an experiment another
job created first is simply looked up again. A stage asks a server whether it answers before it trains
(``check_store``: seconds, exit 69 when it does not), and its later requests retry a bounded time
(``bounded_retries``: MLflow's own defaults retry for ~4.5 minutes per request).
MLflow costs ~3 s to import: it is imported here only, and only when a stage logs.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

STORE_FILE = "mlflow.db"
ARTIFACT_DIR = "mlartifacts"
EXPERIMENT_PREFIX = "dssl"


def project_root(start: Path | None = None) -> Path:
    """The root of the pipeline a stage runs in: the nearest folder, from the working directory up,
    holding a dvc.yaml or the Snakefile. That is the project for params.yaml and a params file's own
    pipeline folder (runs/<profile>/) for any other, where DVC and Snakemake run its stages; its
    tracking store, outputs and inputs all lie there."""
    here = (start or Path.cwd()).resolve()
    for folder in [here, *here.parents]:
        if (folder / "dvc.yaml").exists() or (folder / "Snakefile").exists():
            return folder
    return here


def tracking_uri(root: Path) -> str:
    """MLFLOW_TRACKING_URI wins (a server on a cluster); else the project's SQLite file."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(root / STORE_FILE).resolve()}"


def is_server(uri: str) -> bool:
    """A tracking server (it stores artifacts itself) rather than a database file the client opens."""
    return uri.startswith(("http://", "https://"))


# MLflow's HTTP retry settings for a stage's requests, unless the environment sets them: 2 retries after
# 1 and 2 s, 10 s per attempt, so an unreachable server costs at most ~35 s, not MLflow's ~4.5 minutes.
RETRY_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                  "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
CHECK_TIMEOUT_S = 5.0


@contextmanager
def bounded_retries() -> Iterator[None]:
    """MLflow requests in the block retry a bounded time (``RETRY_DEFAULTS`` where the environment sets
    none); the environment is restored after, so no child process inherits the settings."""
    added = {key: value for key, value in RETRY_DEFAULTS.items() if key not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def store_problem(root: Path) -> str | None:
    """Why the tracking server does not answer (None: it answers, or the store is the project's SQLite
    file). One request to its ``/health`` page with a ``CHECK_TIMEOUT_S`` limit: a closed port fails at
    once, a host or port that never answers after the limit; any HTTP answer counts as an answer."""
    import urllib.error
    import urllib.request

    uri = tracking_uri(root)
    if not is_server(uri):
        return None
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=CHECK_TIMEOUT_S):
            return None
    except urllib.error.HTTPError:
        return None   # it answered (an error page, a login): the requests themselves will tell
    except (OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or err
        return f"{type(reason).__name__}: {str(reason).splitlines()[0][:200] if str(reason) else 'no answer'}"


def experiment_name(profile: str) -> str:
    return f"{EXPERIMENT_PREFIX}-{profile}"


@contextmanager
def _store_lock(root: Path) -> Iterator[None]:
    with open(root / f"{STORE_FILE}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def init_store(root: Path, profile: str) -> str:
    """Create the store and the profile's experiment once (idempotent, safe under concurrency).

    Returns the experiment id. The artifact location is fixed explicitly to an absolute folder so it
    does not depend on the directory a stage happens to run from.
    """
    import logging

    import mlflow

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    uri = tracking_uri(root)
    if is_server(uri):
        return _server_experiment(mlflow.MlflowClient(tracking_uri=uri), experiment_name(profile))
    with _store_lock(root):
        # An explicit client, not mlflow.set_tracking_uri: that also exports MLFLOW_TRACKING_URI, which
        # every later subprocess (another project's stages) would then inherit and log into.
        client = mlflow.MlflowClient(tracking_uri=tracking_uri(root))
        name = experiment_name(profile)
        experiment = client.get_experiment_by_name(name)
        if experiment is not None:
            return experiment.experiment_id
        artifacts = (root / ARTIFACT_DIR / name).resolve()
        return client.create_experiment(name, artifact_location=artifacts.as_uri())


def _server_experiment(client, name: str) -> str:
    """The experiment on a tracking server, created if missing; a concurrent creator may win the race.

    No artifact location is given: the server's proxied artifact root (``mlflow-artifacts:``) is the
    one place every node can write to.
    """
    from mlflow.exceptions import MlflowException

    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return client.create_experiment(name)
    except MlflowException:  # RESOURCE_ALREADY_EXISTS: another job created it in between
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return experiment.experiment_id

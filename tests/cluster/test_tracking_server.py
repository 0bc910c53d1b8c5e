"""`dssl tracking serve` (MLflow server, PostgreSQL store, proxied artifact folder): the CI profile run
by Snakemake with 2 parallel jobs logs every expected run to it exactly once, none lost or duplicated,
and nothing into the project's SQLite file; on SIGTERM the server and its PostgreSQL stop."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from dssl.tracking.names import result_run_name

pytestmark = pytest.mark.slow


def test_parallel_jobs_log_every_run_once(ci_local_run) -> None:
    root, runs = ci_local_run.root, ci_local_run.runs
    names = [r["run_name"] for r in runs]
    assert [n for n, count in Counter(names).items() if count > 1] == []
    assert {r["stage"] for r in runs} == ci_local_run.expected_stages
    assert {r["engine"] for r in runs} == {"snakemake"}

    # every training stage logged one run per seed (a stand-alone stage one per seed and client); every
    # result file's run (named after it) is on the server once
    params = yaml.safe_load((root / "params.yaml").read_text())
    seeds = [str(s) for s in params["seeds"]]
    local_seeds = [str(s) for s in params["pretrain"]["local"]["grids"]["table5"]["seeds"]]   # the grid's own
    training = {r["stage"] for r in runs if r["stage"].startswith("pretrain_")}
    assert training
    for stage in training:
        per_seed = Counter(r["seed"] for r in runs if r["stage"] == stage)
        expected = local_seeds if stage.startswith("pretrain_local") else seeds
        assert sorted(per_seed) == expected and len(set(per_seed.values())) == 1, stage
        assert per_seed[seeds[0]] == (2 if stage.startswith("pretrain_local") else 1), stage   # clients [0, 3]
    named = Counter((r["stage"], r["run_name"]) for r in runs)
    result_files = sorted((root / "reports/metrics").rglob("*.json"))
    assert result_files
    for path in result_files:
        record = json.loads(path.read_text())
        assert "mlflow_run_id" not in record and named[record["stage"], result_run_name(record)] == 1, path

    # artifacts travelled through the server into its folder; the SQLite default was never touched
    assert any(ci_local_run.artifacts.rglob("*.png"))
    assert not (root / "mlflow.db").exists()
    assert ci_local_run.server_exit == 0
    assert not ci_local_run.postgres_running_after

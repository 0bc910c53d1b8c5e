"""`dssl tracking serve`: bad invocations fail at once with one message, before anything starts (the
server itself, with PostgreSQL, is exercised end to end in tests/cluster/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dssl.cli import main
from dssl.tracking.mlflow_store import is_server
from dssl.tracking.server import ServerError, postgres_bin, serve


def test_serve_needs_exactly_one_store(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="exactly one of --backend-store-uri URI and --postgres DIR"):
        serve(tmp_path / "artifacts", "127.0.0.1", 5000)
    with pytest.raises(ServerError, match="exactly one"):
        serve(tmp_path / "artifacts", "127.0.0.1", 5000, "postgresql://u@h/db", tmp_path / "pg")
    assert not (tmp_path / "artifacts").exists()


def test_cli_rejects_a_missing_store(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["tracking", "serve", "--artifacts", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "one of the arguments --postgres --backend-store-uri is required" in capsys.readouterr().err


def test_a_missing_postgres_program_names_the_package() -> None:
    with pytest.raises(ServerError, match="apt-get install postgresql"):
        postgres_bin("no-such-postgres-program")


def test_only_http_uris_are_servers() -> None:
    assert is_server("http://node1:5000") and is_server("https://mlflow.example.org")
    assert not is_server("sqlite:////project/mlflow.db") and not is_server("postgresql://u@h/db")

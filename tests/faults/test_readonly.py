"""A read-only folder, injected for real (a read-only bind mount: root ignores permission bits): every
writer ends in one line naming the file and saying to make its folder writable, exit 2, no temporary file
left; made writable again, the stage runs to the end."""

from __future__ import annotations

from pathlib import Path

import fault_helpers as faults
import pytest
import torch

from dssl.artifacts import WriteError
from dssl.cli import EXIT_BAD_INPUT, main
from dssl.evaluation.progress import Checkpoint
from dssl.federation.checkpoint import save_checkpoint
from dssl.pipeline.common import atomic_file
from dssl.tracking import outbox


def _assert_read_only(error: WriteError, path: Path) -> None:
    assert error.path == path and "read-only file system" in str(error)
    assert "writable" in str(error) and "\n" not in str(error)


def test_writers_in_a_read_only_folder_name_the_file(tmp_path: Path) -> None:
    with faults.read_only(tmp_path / "locked") as locked:
        with pytest.raises(WriteError) as caught:
            save_checkpoint(locked / "run", {"fingerprint": "f", "global_states": [{"w": torch.ones(2)}]})
        _assert_read_only(caught.value, locked / "run")
        with pytest.raises(WriteError) as caught:
            Checkpoint(locked, "f", 0.0).save({"step": 1})
        _assert_read_only(caught.value, locked / "checkpoint.pt")
        with pytest.raises(WriteError) as caught:
            outbox.write_json(locked / "result.json", {"a": 1})
        _assert_read_only(caught.value, locked / "result.json")
        with pytest.raises(WriteError) as caught, atomic_file(locked / "figure.png") as tmp:
            tmp.write_bytes(b"png")
        _assert_read_only(caught.value, locked / "figure.png")
        assert not faults.temporaries(locked)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return faults.prepared_project(tmp_path_factory.mktemp("prepared"))


def test_a_stage_whose_output_folder_is_read_only_stops_with_one_line(prepared: Path, tmp_path: Path, monkeypatch,
                                                                     capsys) -> None:
    root = faults.copy_of(prepared, tmp_path / "project", monkeypatch)
    with faults.read_only(root / "reports/metrics"):
        capsys.readouterr()
        assert main(["evaluate_random", "cnn_small"]) == EXIT_BAD_INPUT
        lines = faults.error_lines(capsys.readouterr().err)
        assert len(lines) == 1 and lines[0].startswith("error: reports/metrics/random"), lines
        assert "read-only file system" in lines[0] and "Make " in lines[0] and "writable" in lines[0]
    assert not faults.temporaries(root)
    assert main(["evaluate_random", "cnn_small"]) == 0
    assert any((root / "reports/metrics/random/cnn_small").rglob("*.json"))

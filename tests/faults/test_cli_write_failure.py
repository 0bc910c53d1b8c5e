"""A full disk or a read-only folder met by code outside the writers that wrap their writes (``WriteError``)
still ends as one line naming the file, or the working folder, and what to do, with exit 2; any other
OSError keeps its traceback."""

from __future__ import annotations

import errno
from pathlib import Path

import fault_helpers as faults
import pytest

import dssl.cli as cli
from dssl.cli import main


def _failing(monkeypatch, action) -> None:
    """``dssl validate`` replaced by ``action`` (a command whose write fails outside a wrapped writer)."""
    def command(args):
        action()
        return 0

    monkeypatch.setattr(cli, "_cmd_validate", command)


def _one_line(capsys) -> str:
    lines = faults.error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    return lines[0]


def test_a_real_read_only_folder_is_one_line_naming_the_file(tmp_path: Path, monkeypatch, capsys) -> None:
    with faults.read_only(tmp_path / "ro") as folder:
        _failing(monkeypatch, lambda: (folder / "notes.txt").write_text("x"))
        assert main(["validate", "params.yaml"]) == 2
    line = _one_line(capsys)
    assert f"{folder / 'notes.txt'}: cannot be written (read-only file system)" in line
    assert f"Make {folder} writable" in line


def test_a_real_full_disk_is_one_line_with_what_to_do(tmp_path: Path, monkeypatch, capsys) -> None:
    """A write to an open file fails without a file name: the line says so and what to check."""
    monkeypatch.chdir(tmp_path)
    with faults.tmpfs(tmp_path / "small", "64k") as folder:
        _failing(monkeypatch, lambda: (folder / "big.bin").write_bytes(b"\0" * 2 ** 20))
        assert main(["validate", "params.yaml"]) == 2
        line = _one_line(capsys)
    assert f"{tmp_path}: a write of this command failed (no space left on the device) and the error names no " \
           "file" in line
    assert "`df -h . " in line and "run the same command again" in line


def test_a_wrapped_error_is_found_behind_its_wrapper(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)

    def fail() -> None:
        try:
            raise OSError(errno.EACCES, "Permission denied")
        except OSError as err:
            raise RuntimeError("a library's own wrapper") from err

    _failing(monkeypatch, fail)
    assert main(["validate", "params.yaml"]) == 2
    assert "a write of this command failed (permission denied)" in _one_line(capsys)


def test_other_os_errors_keep_their_traceback(monkeypatch) -> None:
    def fail() -> None:
        raise OSError(errno.ENOENT, "No such file or directory", "missing.txt")

    _failing(monkeypatch, fail)
    with pytest.raises(FileNotFoundError):
        main(["validate", "params.yaml"])

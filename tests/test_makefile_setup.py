"""`make setup`'s recipe, read from the Makefile with `make -n` (what it would run, nothing run): uv by
default, pinned and byte-compiling; pip on request; an unknown installer stops before anything is made."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_setup(tmp_path: Path, *args: str, dry_run: bool = True) -> subprocess.CompletedProcess:
    """`make setup` into a venv under ``tmp_path``; with ``dry_run`` only printed (`make -n`)."""
    flags = ["-n"] if dry_run else []
    return subprocess.run(["make", *flags, "setup", f"VENV={tmp_path / 'venv'}", *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_setup_installs_the_lock_with_a_pinned_uv_that_compiles_bytecode(tmp_path) -> None:
    result = make_setup(tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("pip install --quiet uv==" in line for line in lines)
    (install,) = [line for line in lines if "uv pip install" in line and "requirements.lock" in line]
    assert "--compile-bytecode" in install and f"--python {tmp_path / 'venv'}/bin/python" in install
    assert not any("compileall" in line for line in lines)


def test_installer_pip_keeps_the_pip_recipe(tmp_path) -> None:
    result = make_setup(tmp_path, "INSTALLER=pip")
    assert result.returncode == 0, result.stderr
    assert "pip install --quiet --no-compile -r requirements.lock" in result.stdout
    assert "compileall" in result.stdout and "uv" not in result.stdout.replace(str(tmp_path), "")


def test_an_unknown_installer_is_refused_by_name_before_anything_is_made(tmp_path) -> None:
    result = make_setup(tmp_path, "INSTALLER=conda", dry_run=False)
    assert result.returncode != 0
    assert "INSTALLER=conda" in result.stderr and "INSTALLER=pip" in result.stderr
    assert not (tmp_path / "venv").exists()

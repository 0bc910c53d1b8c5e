"""The style gate: `ruff check` with the rules pyproject.toml names (pyflakes' errors such as an unused
import or an undefined name, syntax and statement errors, lines of at most 120 characters) finds nothing
in src/, tests/ and benchmarks/. Ruff is pinned in requirements.lock, so the verdict does not move with a
newer release's defaults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ruff_check(*paths: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                           "--config", str(ROOT / "pyproject.toml"), *map(str, paths)],
                          cwd=ROOT, capture_output=True, text=True)


def test_ruff_finds_nothing_in_the_code() -> None:
    result = ruff_check("src", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_configured_rules_catch_an_unused_import_and_a_long_line(tmp_path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\nNAME = '" + "x" * 120 + "'\n")
    result = ruff_check(bad)
    assert result.returncode == 1
    assert "F401" in result.stdout and "E501" in result.stdout

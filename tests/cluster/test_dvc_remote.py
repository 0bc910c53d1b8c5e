"""A DVC remote round trip: the CI profile's outputs pushed to a remote (a folder, as a shared
filesystem would hold it), a fresh `git clone` pulls them, and DVC finds nothing to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dssl.lineage.lock import lock_files
from ci_runs import git_commit, results, run

pytestmark = pytest.mark.slow


def test_push_clone_pull_then_nothing_to_do(ci_local_run, tmp_path: Path) -> None:
    project, remote, clone = tmp_path / "project", tmp_path / "remote", tmp_path / "clone"
    shutil.copytree(ci_local_run.root, project, symlinks=True)
    run(["dvc", "remote", "add", "-d", "shared", str(remote)], project)
    git_commit(project, "DVC remote: a shared folder")
    run(["dvc", "push"], project)

    run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    assert results(clone) == {}  # outputs live in DVC, not in git (only their .gitignore files do)
    run(["dvc", "pull"], clone)

    assert results(clone) == results(project)
    for lock in lock_files(project):   # every lock file, committed with the project, reads back the same
        assert (clone / lock.relative_to(project)).read_bytes() == lock.read_bytes()
    assert run(["dvc", "status", "--json"], clone).strip().splitlines()[-1] == "{}"
    assert "Running stage" not in run(["dvc", "repro"], clone)

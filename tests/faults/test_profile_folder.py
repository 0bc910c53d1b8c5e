"""A run writes only where its params file says: the project's params.yaml into the project, any other
file into its pipeline folder runs/<profile>/. A stage (and `dssl repro`) started elsewhere, or in a
folder rendered for another file of the same profile, stops before any work with exit 2 and one line
saying where to run it; run there as printed, it writes into that folder and nowhere else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dssl.cli import EXIT_BAD_INPUT, main


@pytest.fixture
def project(make_project, monkeypatch) -> Path:
    """The CI profile as the project's params.yaml, and a copy of it with a profile of its own."""
    root = make_project("configs/ci.yaml")
    monkeypatch.chdir(root)
    monkeypatch.setenv("DSSL_WARM", "0")
    monkeypatch.setenv("DSSL_WORKERS", "1")
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    text = (root / "params.yaml").read_text()
    (root / "my_params.yaml").write_text(re.sub(r"(?m)^profile: .*$", "profile: mine", text))
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".git/" not in p.as_posix()}


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    return err


def test_another_params_file_in_the_project_root_is_refused_then_runs_in_its_folder(project: Path, monkeypatch,
                                                                                    capsys) -> None:
    before = snapshot(project)
    assert main(["prepare", "digits", "--params", "my_params.yaml"]) == EXIT_BAD_INPUT
    err = one_line(capsys)
    assert "writes only into its pipeline folder runs/mine/" in err, err
    assert snapshot(project) == before and not (project / "runs").exists() and not (project / "mlflow.db").exists()

    # the printed way works as printed: render the folder, then run the stage in it
    (how,) = re.findall(r"\(`(.+)`\)$", err)
    render, go = how.split(" && ", 1)
    assert render == "dssl dag write --params my_params.yaml"
    assert main(render.split()[1:]) == 0
    folder, command = go.removeprefix("cd ").split(" && ")
    assert folder == "runs/mine" and command == "dssl prepare digits --params ../../my_params.yaml"
    monkeypatch.chdir(project / folder)
    assert main(command.split()[1:]) == 0
    assert (project / "runs/mine/data/prepared/digits/meta.json").is_file()
    assert (project / "runs/mine/mlflow.db").is_file()   # its own tracking store, not the project's
    after = snapshot(project)
    assert {k: v for k, v in after.items() if not k.startswith("runs/")} == before
    assert not (project / "data").exists() and not (project / "mlflow.db").exists()


def test_a_folder_rendered_for_another_file_of_the_profile_is_refused(project: Path, monkeypatch, capsys) -> None:
    assert main(["dag", "write", "--params", "my_params.yaml"]) == 0
    (project / "other.yaml").write_text((project / "my_params.yaml").read_text())
    capsys.readouterr()
    before = snapshot(project)
    monkeypatch.chdir(project / "runs/mine")
    assert main(["prepare", "digits", "--params", "../../other.yaml"]) == EXIT_BAD_INPUT
    err = one_line(capsys)
    assert "holds the pipeline of my_params.yaml (the same profile, 'mine')" in err, err
    monkeypatch.chdir(project)
    assert main(["repro", "--params", "other.yaml"]) == EXIT_BAD_INPUT
    err = one_line(capsys)
    assert "holds the pipeline of my_params.yaml" in err and "give other.yaml a profile of its own" in err, err
    assert snapshot(project) == before


def test_the_pipeline_folder_without_its_dvc_yaml_is_refused(project: Path, monkeypatch, capsys) -> None:
    """Without runs/mine/dvc.yaml nothing records the run there, and the project's store would take its runs."""
    (project / "runs/mine").mkdir(parents=True)
    monkeypatch.chdir(project / "runs/mine")
    before = snapshot(project)
    assert main(["prepare", "digits", "--params", "../../my_params.yaml"]) == EXIT_BAD_INPUT
    assert "has no dvc.yaml yet" in one_line(capsys)
    assert snapshot(project) == before

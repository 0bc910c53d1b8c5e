"""`dssl repro` (dssl.pipeline.repro) on a small DVC project of shell stages: stages that do not read
each other run at the same time, a stage starts only after the stages it reads from are recorded, the
lock files are those `dvc repro` writes (DVC finds nothing to do afterwards), an unchanged stage is
skipped, and a failing stage stops the run without losing what the stages beside it produced."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dssl.pipeline.repro import ReproError, default_jobs, reproduce

BIN = Path(sys.executable).parent


def dvc(root: Path, *args: str) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["dvc", *args], cwd=root, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def stage(cmd: str, deps: list[str], outs: list[str]) -> dict:
    return {"cmd": cmd, "deps": deps, "outs": outs} if deps else {"cmd": cmd, "outs": outs}


def timed(name: str, seconds: float, reads: str = "") -> str:
    """A command that notes when it started and ended (in its output) around a sleep."""
    copy = f"cat {reads} | sed 's/^/read /' >> {name}.txt; " if reads else ""
    return (f"python3 -c \"import time; print('start', time.time())\" > {name}.txt; {copy}sleep {seconds}; "
            f"python3 -c \"import time; print('end', time.time())\" >> {name}.txt")


def window(root: Path, name: str) -> tuple[float, float]:
    lines = dict(line.split() for line in (root / f"{name}.txt").read_text().splitlines()
                 if line.startswith(("start", "end")))
    return float(lines["start"]), float(lines["end"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    dvc(tmp_path, "init", "-q")
    (tmp_path / "input.txt").write_text("data\n")
    stages = {
        "a": stage(timed("a", 0.5, "input.txt"), ["input.txt"], ["a.txt"]),
        "b": stage(timed("b", 1.5, "input.txt"), ["input.txt"], ["b.txt"]),
        "c": stage(timed("c", 0.1, "a.txt b.txt"), ["a.txt", "b.txt"], ["c.txt"]),
    }
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    return tmp_path


def test_independent_stages_overlap_and_dvc_records_them(project: Path) -> None:
    assert reproduce(project, ["dvc.yaml"], jobs=2) == 3
    (a_start, a_end), (b_start, b_end) = window(project, "a"), window(project, "b")
    assert a_start < b_end and b_start < a_end          # a and b ran at the same time
    assert window(project, "c")[0] >= b_end              # c only after both, though a slot was free from a_end
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"a", "b", "c"}
    assert "Running stage" not in dvc(project, "repro")   # DVC agrees: everything is recorded
    assert dvc(project, "status").strip() == "Data and pipelines are up to date."


def test_one_slot_runs_one_stage_at_a_time(project: Path) -> None:
    reproduce(project, ["dvc.yaml"], jobs=1)
    (a_start, a_end), (b_start, b_end) = window(project, "a"), window(project, "b")
    assert a_end <= b_start or b_end <= a_start


def test_only_changed_stages_run_again(project: Path) -> None:
    reproduce(project, ["dvc.yaml"], jobs=2)
    before = {name: (project / f"{name}.txt").read_text() for name in "abc"}
    assert reproduce(project, ["dvc.yaml"], jobs=2) == 0
    assert {name: (project / f"{name}.txt").read_text() for name in "abc"} == before
    spec = yaml.safe_load((project / "dvc.yaml").read_text())
    spec["stages"]["b"]["cmd"] = spec["stages"]["b"]["cmd"].replace("sleep 1.5", "sleep 0.2")
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert reproduce(project, ["dvc.yaml"], jobs=2) == 2     # b, and c, which reads it
    assert (project / "a.txt").read_text() == before["a"]


def test_a_failing_stage_keeps_what_the_others_produced(project: Path) -> None:
    spec = yaml.safe_load((project / "dvc.yaml").read_text())
    spec["stages"]["b"]["cmd"] = "sleep 0.2; echo broken >&2; exit 3"
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(ReproError, match=r"failed to reproduce 'b'; 1 stages after them did not run"):
        reproduce(project, ["dvc.yaml"], jobs=2)
    # a was running beside b: it finished and DVC recorded it; c, which reads b, never started
    assert (project / "a.txt").is_file() and not (project / "c.txt").exists()
    assert set(yaml.safe_load((project / "dvc.lock").read_text())["stages"]) == {"a"}


def test_the_command_refuses_bad_input_before_running(make_project, capsys, monkeypatch) -> None:
    from dssl.cli import EXIT_BAD_INPUT, main

    root = make_project("configs/ci.yaml")
    monkeypatch.chdir(root)
    assert main(["repro", "--jobs", "0"]) == EXIT_BAD_INPUT
    assert "--jobs must be at least 1, got 0" in capsys.readouterr().err
    (root / "dvc.yaml").unlink()
    assert main(["repro"]) == EXIT_BAD_INPUT
    assert "dvc.yaml does not exist: run `dssl dag write --params params.yaml` first" in capsys.readouterr().err


def test_a_light_stage_that_unblocks_a_long_one_starts_before_a_medium_one(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    dvc(tmp_path, "init", "-q")
    (tmp_path / "input.txt").write_text("data\n")
    stages = {"medium": stage(timed("medium", 0.1), ["input.txt"], ["medium.txt"]),
              "light": stage(timed("light", 0.1), ["input.txt"], ["light.txt"]),
              "long": stage(timed("long", 0.1, "light.txt"), ["light.txt"], ["long.txt"])}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    reproduce(tmp_path, ["dvc.yaml"], jobs=1, sizes={"long": (100.0, 1), "medium": (10.0, 1)})
    starts = {name: window(tmp_path, name)[0] for name in stages}
    assert starts["light"] < starts["long"] < starts["medium"]


def test_stage_sizes_count_seeds_and_passes_over_the_data() -> None:
    from dssl.pipeline.catalogue import instances
    from dssl.pipeline.repro import stage_sizes
    from dssl.pipeline.validate import load_params_fully

    params = load_params_fully(Path(__file__).resolve().parents[2] / "configs/ci.yaml")
    sizes = stage_sizes(params)
    for instance in instances(params):
        cost, tasks = sizes[instance.name]
        assert (cost > 0) == instance.kind.training, instance.name
        assert tasks >= 1 and (tasks > 1) <= instance.kind.training, instance.name
    fl = next(s for s in instances(params) if s.kind.name == "pretrain_fl")
    train = params["pretrain"]["fl"]["train"] | (params["strategies"][fl.fields["strategy"]].get("train") or {})
    clients = params["partitions"][fl.fields["partition"]]["clients"]
    passes = train["rounds"] * train.get("clients_per_round", clients) * train.get("local_epochs", 1) / clients
    assert sizes[fl.name] == (sizes[fl.name][1] * passes, len(params["seeds"]))


def test_stages_share_the_cores_but_not_an_accelerator() -> None:
    assert default_jobs(16, "cpu") == 16
    assert default_jobs(16, "cuda") == 1

"""On a copy of the session's `dvc repro` run of the CI profile (``ci_runs.ci_dvc_run``):
`dssl lineage` answers with exactly what dvc.lock and the MLflow store hold and notices an edited
partition file; DVC's own tools (metrics show/diff, params diff, plots show, exp run/show) work on the
rendered dvc.yaml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ci_runs import copy_run, warm_env, warm_stage_server

from dssl.lineage import lineage as trace
from dssl.lineage import render_text
from dssl.lineage.lock import lock_files
from dssl.tracking.lineage import file_md5
from dssl.tracking.names import result_run_name

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
RESULT = "reports/metrics/fl/simsiam-cnn/fl-label/fedavg/seed-1/digits-finetune.json"
PARTITION = "data/partitions/fl-label/partition.json"


def run(cmd: list[str], cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if ok:
        assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def dvc_json(cmd: list[str], cwd: Path):
    """The JSON a `dvc ... --json` command prints (DVC may print warnings before it)."""
    out = run(["dvc", *cmd, "--json"], cwd).stdout
    return json.loads(out[min(i for i in (out.find("{"), out.find("[")) if i >= 0):])


@pytest.fixture(scope="module")
def project(ci_dvc_run, tmp_path_factory) -> Path:
    """The run, committed to git, in a folder of this module's (the tests edit and run experiments)."""
    return copy_run(ci_dvc_run, tmp_path_factory.mktemp("lineage") / "ci")


def lineage(root: Path, *args: str) -> dict:
    return json.loads(run(["dssl", "lineage", "--json", *args], root).stdout)


def store_run(root: Path, run_id: str):
    import mlflow

    from dssl.tracking import tracking_uri

    return mlflow.MlflowClient(tracking_uri=tracking_uri(root)).get_run(run_id)


def test_lineage_of_a_result_is_what_dvc_lock_and_mlflow_hold(project: Path) -> None:
    answer = lineage(project, RESULT)
    (result,) = answer["results"]
    record = json.loads((project / RESULT).read_text())
    assert result["file"] == RESULT and result["result"]["test_acc"] == record["test_acc"]
    assert answer["matches_lock"] and result["mismatches"] == []

    lock = {name: entry for path in lock_files(project)   # the top-level dvc.lock and each kind file's
            for name, entry in yaml.safe_load(path.read_text())["stages"].items()}
    stages = {s["name"]: s for s in result["stages"]}
    evaluate, pretrain = "evaluate_fl@simsiam-cnn-fl-label-fedavg", "pretrain_fl@simsiam-cnn-fl-label-fedavg"
    assert set(stages) == {evaluate, pretrain, "partitions", "prepare@digits", "code"}
    for name, stage in stages.items():
        assert stage["params"] == lock[name].get("params", {}).get("params.yaml", {}), name
        assert {d["path"]: d["md5_lock"] for d in stage["deps"]} == {d["path"]: d["md5"] for d in lock[name]["deps"]}
        assert all(c["status"] == "matches" for c in stage["deps"] + stage["outs"] + stage["files"]), name

    evaluation, pretraining = stages[evaluate], stages[pretrain]
    assert evaluation["role"] == "evaluation" and pretraining["role"] == "pretraining"
    name = result_run_name(record)   # the result holds no run id: its run is named after it
    assert result["result"]["run_name"] == name and evaluation["run"]["name"] == name
    assert "result file's md5" in evaluation["run"]["matched_by"]
    for stage in (evaluation, pretraining, stages["partitions"]):
        logged = store_run(project, stage["run"]["id"])
        assert stage["run"]["params"] == logged.data.params
        assert stage["run"]["metrics"] == logged.data.metrics
        assert stage["run"]["tags"]["git_commit"] == logged.data.tags["git_commit"]
        assert logged.data.tags["stage"] == stage["name"]
    assert pretraining["run"]["tags"]["seed"] == "1" and pretraining["run"]["name"].endswith("/seed-1")
    # which machine trained and evaluated the number: the run's hardware, and the result file's
    assert pretraining["run"]["tags"]["hardware.cpu_capability"] == evaluation["run"]["tags"]["hardware.cpu_capability"]
    assert record["hardware"].startswith(pretraining["run"]["tags"]["hardware.cpu"])
    assert stages["partitions"]["run"]["name"] == "partitions/fl-label"
    # the model folder of this seed and the partition files, each with its md5
    model_files = {f["path"] for f in pretraining["files"]}
    assert "models/fl/simsiam-cnn/fl-label/fedavg/seed-1/encoder.pt" in model_files
    assert not any("seed-0" in path for path in model_files)
    partition = {f["path"]: f for f in stages["partitions"]["files"]}[PARTITION]
    assert partition["md5_lock"] == partition["md5_now"] == file_md5(project / PARTITION)
    text = run(["dssl", "lineage", RESULT], project).stdout
    assert (evaluation["run"]["id"] in text and name in text and "workspace matches dvc.lock" in text
            and "hardware.cpu_capability" in text)


def test_lineage_of_a_table_cell_lists_every_seed(project: Path) -> None:
    answer = lineage(project, "reports/sections/table1.csv", "SimSiam + CNN", "Digits L/non-IID")
    files = [r["file"] for r in answer["results"]]
    assert files == [RESULT.replace("seed-1", "seed-0"), RESULT]
    accuracies = [r["result"]["test_acc"] for r in answer["results"]]
    assert float(answer["cell"]["mean"]) == pytest.approx(100 * sum(accuracies) / len(accuracies), abs=1e-4)


@pytest.mark.parametrize("args, message", [
    (["reports/metrics/fl/nothing.json"], "no such result file"),
    (["reports/sections/table1.csv", "BYOL + CNN", "digits IID"], "no row 'BYOL + CNN'"),
    (["reports/sections/table1.csv", "SimSiam + CNN", "cifar10 IID"], "has no column 'cifar10 IID'"),
    (["reports/sections/table1.csv"], "a table needs a row and a column"),
])
def test_bad_questions_get_one_clear_error(project: Path, args: list[str], message: str) -> None:
    answer = run(["dssl", "lineage", *args], project, ok=False)
    assert answer.returncode == 2 and message in answer.stderr, answer.stderr


def test_without_dvc_lock_lineage_says_so(project: Path) -> None:
    locks = lock_files(project)   # the top-level one and each kind file's
    assert len(locks) > 1
    for lock in locks:
        lock.rename(lock.with_suffix(".aside"))
    try:
        answer = run(["dssl", "lineage", RESULT], project, ok=False)
    finally:
        for lock in locks:
            lock.with_suffix(".aside").rename(lock)
    assert answer.returncode == 2 and "no dvc.lock" in answer.stderr


def test_an_edited_partition_file_is_reported(project: Path) -> None:
    path = project / PARTITION
    original = path.read_bytes()
    path.write_bytes(original.replace(b"\n", b" \n", 1))
    try:
        refused = run(["dssl", "lineage", "--json", RESULT], project, ok=False)
        text = render_text(trace(project, project / RESULT))  # in this process: MLflow imported once
    finally:
        path.write_bytes(original)
    answer = json.loads(refused.stdout)   # the whole answer, and exit 2 with one line: not the record
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "the workspace does not match dvc.lock" in refused.stderr and "fl-label changed" in refused.stderr
    (result,) = answer["results"]
    assert not answer["matches_lock"]
    partitions = {s["name"]: s for s in result["stages"]}["partitions"]
    edited = {f["path"]: f for f in partitions["files"]}[PARTITION]
    assert edited["status"] == "changed" and edited["md5_now"] != edited["md5_lock"]
    assert f"partitions: {PARTITION} changed" in result["mismatches"]
    assert "workspace does NOT match dvc.lock" in text and f"CHANGED, now {edited['md5_now']}" in text
    assert all(r.matches_lock for r in trace(project, project / RESULT)["results"])


def test_dvc_metrics_show_and_diff_read_the_results(project: Path) -> None:
    shown = dvc_json(["metrics", "show"], project)[""]["data"]
    results = sorted(p.relative_to(project).as_posix() for p in (project / "reports/metrics").rglob("*.json"))
    assert sorted(shown) == results
    assert shown[RESULT]["data"]["test_acc"] == json.loads((project / RESULT).read_text())["test_acc"]

    path = project / RESULT
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "test_acc": 0.5}))
    try:
        diff = dvc_json(["metrics", "diff"], project)
    finally:
        run(["dvc", "checkout", "--force", RESULT.rsplit("/seed-", 1)[0]], project)
    assert diff[RESULT]["test_acc"] == {"old": record["test_acc"], "new": 0.5,
                                       "diff": pytest.approx(0.5 - record["test_acc"])}
    assert json.loads(path.read_text()) == record


def test_dvc_plots_show_renders_table1_and_the_figures(project: Path, tmp_path: Path) -> None:
    plots = dvc_json(["plots", "show", "--out", str(tmp_path / "plots")], project)
    assert not plots.get("errors"), plots.get("errors")
    (table1,) = plots["data"]["table1"]
    assert table1["type"] == "vega"
    values = table1["content"]["data"]["values"]
    assert {v["row"] for v in values} == {"SimSiam + CNN", "MAE + ViT"}
    for figure in ("fig2a", "claims", "table1", "fig3"):   # the report's figures folder is a DVC plot
        assert plots["data"][f"reports/figures/report/{figure}.png"][0]["type"] == "image"
    (fig2a,) = plots["data"]["fig2a"]
    assert {v["graph"] for v in fig2a["content"]["data"]["values"]} == {"uniform-3", "general-3", "general-3-plus2",
                                                                         "complete"}
    assert plots["data"]["reports/figures/partitions/fl-label.png"][0]["type"] == "image"


def test_dvc_exp_run_then_exp_show_and_params_diff(project: Path) -> None:
    """Last in this module: the experiment leaves its params and results in the workspace."""
    with warm_stage_server(project, warm_env()):
        ran = run(["dvc", "exp", "run", "-n", "central-2ep", "-S", "pretrain.central.train.epochs=2"], project)
    output = (ran.stdout + ran.stderr).splitlines()
    stages = {line.split("'")[1].rpartition(":")[2] for line in output if line.startswith("Running stage")}
    assert stages == {"pretrain_central@simsiam-cnn", "evaluate_central@simsiam-cnn", "report"}

    params = dvc_json(["params", "diff"], project)["params.yaml"]
    assert params["pretrain.central.train.epochs"] == {"old": 1, "new": 2, "diff": 1}

    shown = dvc_json(["exp", "show"], project)
    baseline = next(row for row in shown if row["rev"] != "workspace")
    (experiment,) = [rev for exp in baseline["experiments"] for rev in exp["revs"] if rev["name"] == "central-2ep"]
    data = experiment["data"]
    assert data["params"]["params.yaml"]["data"]["pretrain"]["central"]["train"]["epochs"] == 2
    central = "reports/metrics/central/simsiam-cnn/seed-0/digits-linear_probe.json"
    assert data["metrics"][central]["data"]["test_acc"] == json.loads((project / central).read_text())["test_acc"]
    assert "mlflow_run_id" not in data["metrics"][central]["data"]
    table = run(["dvc", "exp", "show", "--no-pager", "--md", "--drop", ".*", "--keep",
                 "Experiment|.*central.*test_acc|pretrain.central.train.epochs"], project).stdout
    assert "central-2ep" in table and "seed-0/digits-linear_probe.json:test_acc" in table

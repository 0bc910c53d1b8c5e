"""The parts of `dssl lineage` that need no pipeline run: DVC's folder hash, the dvc.lock walk, the
Table 1 `runs` column, and the catalogue's metrics/plots declarations in dvc.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dssl.config.params import read_params
from dssl.lineage.cell import CellRun, cell_runs, result_file
from dssl.lineage.lock import LineageError, folder_md5, producer, producers, read_lock
from dssl.pipeline.catalogue import KINDS, StageKind, declared_outputs, instances
from dssl.pipeline.dvcfile import TOP_LEVEL, render_files, rendered_stages
from dssl.tracking.names import result_run_name

REPO = Path(__file__).resolve().parents[2]


def test_folder_md5_is_dvcs_own_hash(tmp_path: Path) -> None:
    from dvc_data.hashfile.hash_info import HashInfo
    from dvc_data.hashfile.meta import Meta
    from dvc_data.hashfile.tree import Tree

    from dssl.tracking.lineage import file_md5

    (tmp_path / "seed-0").mkdir()
    (tmp_path / "seed-0" / "encoder.pt").write_bytes(b"\x00\x01weights")
    (tmp_path / "partition.json").write_text('{"clients": 4}\n')
    tree = Tree()
    for path in sorted(p for p in tmp_path.rglob("*") if p.is_file()):
        tree.add(path.relative_to(tmp_path).parts, Meta(), HashInfo("md5", file_md5(path)))
    tree.digest()
    assert folder_md5(tmp_path) == tree.hash_info.value  # DVC writes it "<md5>.dir"


LOCK = {"schema": "2.0", "stages": {
    "partitions": {"cmd": "dssl partitions", "deps": [{"path": "data/prepared/digits", "md5": "a.dir"}],
                   "params": {"params.yaml": {"partitions": {"p": {"clients": 4}}}},
                   "outs": [{"path": "data/partitions/p", "md5": "b.dir"}]},
    "evaluate_fl@m-p": {"cmd": "dssl evaluate_fl m p", "deps": [{"path": "data/partitions", "md5": "c.dir"}],
                        "outs": [{"path": "reports/metrics/fl/m/p", "md5": "d.dir"}]},
}}


def test_the_lock_names_producers_of_files_folders_and_parent_folders(tmp_path: Path) -> None:
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(LOCK))
    lock = read_lock(tmp_path)
    assert lock["partitions"].params == {"partitions": {"p": {"clients": 4}}}
    assert producer(lock, "reports/metrics/fl/m/p/seed-0/digits-finetune.json").name == "evaluate_fl@m-p"
    assert producer(lock, "data/partitions/p/partition.json").name == "partitions"
    assert [s.name for s in producers(lock, "data/partitions")] == ["partitions"]  # a folder holding outputs
    assert producer(lock, "data/graphs/g/graph.json") is None


def test_no_lock_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LineageError, match="no dvc.lock.*dvc repro"):
        read_lock(tmp_path)


IID_STAGE = "evaluate_fl@simsiam-cnn-fl-iid"
TABLE = (
    "row,dataset,setting,mean,std,n,runs,drop,within_noise\n"
    f"SimSiam + CNN,digits,IID,13.7778,2.5142,2,seed 0: {IID_STAGE} ({IID_STAGE}/seed-0/digits-finetune); "
    f"seed 1: {IID_STAGE} ({IID_STAGE}/seed-1/digits-finetune),,\n"
    "SimSiam + CNN,cifar10,L/non-IID,15.5556,0.9428,1,seed 2: evaluate_fl@simsiam-cnn-fl-label "
    "(evaluate_fl@simsiam-cnn-fl-label/seed-2/cifar10-finetune),1.78,True\n"
)


def test_a_cell_is_found_by_row_and_column_as_printed_or_as_in_params(tmp_path: Path) -> None:
    table = tmp_path / "table1.csv"
    table.write_text(TABLE)
    cell, runs = cell_runs(table, "simsiam + cnn", "Digits IID")
    assert cell["mean"] == "13.7778"
    assert [(r.seed, r.stage, r.run_name) for r in runs] == [
        (0, IID_STAGE, f"{IID_STAGE}/seed-0/digits-finetune"), (1, IID_STAGE, f"{IID_STAGE}/seed-1/digits-finetune")]
    assert [r.seed for r in cell_runs(table, "SimSiam + CNN", "CIFAR-10 L/non-IID")[1]] == [2]
    assert [r.seed for r in cell_runs(table, "SimSiam + CNN", "L/non-IID")[1]] == [2]  # one dataset has it


def test_a_cell_run_leads_to_the_result_file_named_after_it(tmp_path: Path) -> None:
    """A result holds no run id: the table's run name is derived from the file (stage, seed, dataset,
    protocol), so the file is found by it, and a run no file matches is a clear error."""
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(LOCK))
    lock = read_lock(tmp_path)
    folder = tmp_path / "reports/metrics/fl/m/p/seed-1"
    folder.mkdir(parents=True)
    for protocol in ("knn", "finetune"):
        record = {"stage": "evaluate_fl@m-p", "seed": 1, "dataset": "digits", "protocol": protocol}
        (folder / f"digits-{protocol}.json").write_text(json.dumps(record))
    (folder / "notes.json").write_text("[1, 2]")   # a JSON that is no result is passed over
    run = CellRun(1, "evaluate_fl@m-p", result_run_name(record))
    assert run.run_name == "evaluate_fl@m-p/seed-1/digits-finetune"
    assert result_file(tmp_path, lock, run) == "reports/metrics/fl/m/p/seed-1/digits-finetune.json"
    with pytest.raises(LineageError, match="no result file of evaluate_fl@m-p is the one of MLflow run"):
        result_file(tmp_path, lock, CellRun(0, "evaluate_fl@m-p", "evaluate_fl@m-p/seed-0/digits-finetune"))


@pytest.mark.parametrize("row, column, message", [
    ("BYOL + CNN", "digits IID", "no row 'BYOL \\+ CNN'; rows: SimSiam \\+ CNN"),
    ("SimSiam + CNN", "digits F/non-IID", "no column 'digits F/non-IID'; columns of that row: digits IID, cifar10"),
])
def test_an_unknown_row_or_column_lists_what_exists(tmp_path: Path, row: str, column: str, message: str) -> None:
    table = tmp_path / "table1.csv"
    table.write_text(TABLE)
    with pytest.raises(LineageError, match=message):
        cell_runs(table, row, column)


def test_a_missing_table_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LineageError, match="no such table"):
        cell_runs(tmp_path / "table1.csv", "SimSiam + CNN", "digits IID")


def test_evaluation_results_are_metrics_and_figures_plots_in_dvc_yaml() -> None:
    params = read_params(REPO / "configs/ci.yaml")
    dvc = {**yaml.safe_load(render_files(params, REPO)[TOP_LEVEL]), "stages": rendered_stages(params, REPO)}
    for kind in ("evaluate_fl", "evaluate_decl", "evaluate_central", "evaluate_random"):
        block = dvc["stages"][kind]["do"]
        assert block["metrics"][0].startswith("reports/metrics/") and "outs" not in block, kind
    assert "reports/figures/partitions/fl-iid.png" in dvc["stages"]["partitions"]["plots"]
    assert "reports/sections" in dvc["stages"]["report"]["outs"]
    table1, fig2a = dvc["plots"]
    assert table1["table1"]["y"] == {"reports/sections/table1.csv": "row"}
    assert fig2a["fig2a"]["y"] == {"reports/sections/fig2a.csv": "mean"} and fig2a["fig2a"]["x"] == "connectivity"
    assert dvc["stages"]["report"]["plots"] == ["reports/figures/report"]   # every figure of the report
    assert (REPO / ".dvc/plots" / f"{table1['table1']['template']}.json").is_file()


def test_metrics_and_plots_are_outputs_to_both_engines() -> None:
    params = read_params(REPO / "configs/ci.yaml")
    for stage in instances(params):
        assert set(stage.metrics) | set(stage.plots) <= set(stage.outputs), stage.name
    bad = StageKind("bad", "code:run", (), "", grid=lambda p: [{}], params=lambda p: [],
                    outputs=lambda p: ["a/"], metrics=lambda p: ["b/"])
    with pytest.raises(ValueError, match="not among its outputs"):
        declared_outputs(bad, params)
    assert all(declared_outputs(kind, params) for kind in KINDS)

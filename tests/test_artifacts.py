"""Damaged stage outputs: every loader raises one ArtifactError naming the file and the way back."""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from dssl.artifacts import ArtifactError, load_npz, load_torch, read_json, stable_float, stable_floats
from dssl.data.datasets import DATASETS, load_split
from dssl.data.imageset import save_arrays
from dssl.data.partition import create_partition, load_counts, load_partition, save_partition
from dssl.reporting.results import load_results
from dssl.topology.graphs import create_graph, load_graph, save_graph
from dssl.topology.mixing import mixing_matrix
from dssl.config.mixing import MIXING_SPECS

REPO = Path(__file__).resolve().parents[1]
CI_PARAMS = REPO / "configs" / "ci.yaml"
RECOVERY = "Restore the recorded version with `dvc checkout --force"


def check(err: pytest.ExceptionInfo, path: Path, problem: str) -> None:
    """The message names the file, the problem and the recovery; the parts stay readable."""
    message = str(err.value)
    assert message.startswith(f"{path}: "), message
    assert problem in err.value.problem and problem in message
    assert f"{RECOVERY} {path}`" in message and "rebuild it with `dvc repro`" in message
    assert err.value.path == Path(path)
    assert err.traceback  # raised, not printed


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


# --- the error itself ------------------------------------------------------------------------------


def test_message_format_attributes_and_pickling() -> None:
    err = ArtifactError("data/partitions/a/partition.json", "missing key 'client_augment'.")
    assert str(err) == (
        "data/partitions/a/partition.json: missing key 'client_augment'. Restore the recorded version with "
        "`dvc checkout --force data/partitions/a/partition.json` or rebuild it with `dvc repro` (it re-runs the "
        "stage whose output changed)."
    )
    assert err.problem == "missing key 'client_augment'" and isinstance(err, ValueError)
    named = ArtifactError(err.path, err.problem, stage="partition@a")
    assert str(named).endswith("(it re-runs the stage partition@a whose output changed).")
    again = pickle.loads(pickle.dumps(named))
    assert str(again) == str(named) and again.stage == "partition@a" and again.path == named.path


def test_read_json_checks_existence_syntax_keys_and_types(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    with pytest.raises(ArtifactError) as err:
        read_json(path)
    check(err, path, "does not exist")
    path.write_text('{"n": 3, "name": "x"')
    with pytest.raises(ArtifactError) as err:
        read_json(path)
    check(err, path, "not valid JSON")
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ArtifactError) as err:
        read_json(path)
    check(err, path, "not UTF-8")
    path.write_text('{"n": true, "name": "x", "w": 2}')
    with pytest.raises(ArtifactError) as err:
        read_json(path, {"n": int})
    check(err, path, "key 'n' should be an integer, got bool")
    assert read_json(path, {"w": float, "name": str}) == {"n": True, "name": "x", "w": 2}
    with pytest.raises(ArtifactError) as err:
        read_json(path, ["n", "other"])
    check(err, path, "missing key 'other'")


# --- prepared data ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("prepared") / "digits"
    DATASETS["digits"].prepare({}, out)
    return out


@pytest.fixture
def digits(prepared: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(prepared, tmp_path / "digits"))


def test_truncated_prepared_npz(digits: Path) -> None:
    truncate(digits / "train.npz")
    with pytest.raises(ArtifactError) as err:
        load_split(digits, "train")
    check(err, digits / "train.npz", "not a readable .npz archive")


def test_prepared_npz_cut_inside_an_array_and_garbage(digits: Path) -> None:
    # Keep the archive's directory but damage a member's bytes: the CRC check must catch it.
    data = bytearray((digits / "train.npz").read_bytes())
    data[200:260] = b"\x00" * 60
    (digits / "train.npz").write_bytes(bytes(data))
    with pytest.raises(ArtifactError) as err:
        load_split(digits, "train")
    check(err, digits / "train.npz", "truncated or damaged")
    (digits / "test.npz").write_text("not a zip at all")
    with pytest.raises(ArtifactError) as err:
        load_split(digits, "test")
    check(err, digits / "test.npz", "not a readable .npz archive")


def test_prepared_npz_missing_array_or_wrong_shape(digits: Path) -> None:
    arrays = load_npz(digits / "train.npz", ["images", "labels"])
    save_arrays(digits / "train.npz", images=arrays["images"])
    with pytest.raises(ArtifactError) as err:
        load_split(digits, "train")
    check(err, digits / "train.npz", "has no array 'labels'")
    save_arrays(digits / "train.npz", images=arrays["images"], labels=arrays["labels"][:-1])
    with pytest.raises(ArtifactError) as err:
        load_split(digits, "train")
    check(err, digits / "train.npz", "array 'labels' should be")
    (digits / "test.npz").unlink()
    with pytest.raises(ArtifactError) as err:
        load_split(digits, "test")
    check(err, digits / "test.npz", "does not exist")


def test_prepared_meta_damaged(digits: Path) -> None:
    truncate(digits / "meta.json")
    with pytest.raises(ArtifactError) as err:
        load_split(digits, "train")
    check(err, digits / "meta.json", "not valid JSON")
    (digits / "meta.json").write_text(json.dumps({"name": "digits", "format": "arrays", "splits": ["train"]}))
    with pytest.raises(ArtifactError) as err:
        load_split(digits, "train")
    check(err, digits / "meta.json", "missing key 'num_classes'")


def test_prepared_file_index_damaged(tmp_path: Path) -> None:
    folder = tmp_path / "mini"
    folder.mkdir()
    index = "path,label,bytes,md5\na/1.png,0,10,0\na/2.png,"
    meta = {"name": "mini_imagenet", "format": "memmap", "num_classes": 2, "splits": ["train"],
            "arrays": {"train": {"file": "train.npy", "index": "train.csv", "chunk_images": 1, "chunk_md5": [],
                                 "index_md5": hashlib.md5(index.encode()).hexdigest()}}}
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "train.csv").write_text(index)
    with pytest.raises(ArtifactError) as err:
        load_split(folder, "train")
    check(err, folder / "train.csv", "not a valid path,label index")


# --- partitions ------------------------------------------------------------------------------------

LABELS = np.random.default_rng(0).integers(0, 5, size=120)


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    part = create_partition(LABELS, {"scheme": "dirichlet_balanced", "clients": 4, "alpha": 0.5}, 0)
    save_partition(part, LABELS, 5, tmp_path / "part")
    return tmp_path / "part"


def test_partition_json_bad_json(partition_dir: Path) -> None:
    truncate(partition_dir / "partition.json", 0.7)
    with pytest.raises(ArtifactError) as err:
        load_partition(partition_dir)
    check(err, partition_dir / "partition.json", "not valid JSON")


def test_partition_json_missing_key_or_bad_content(partition_dir: Path) -> None:
    path = partition_dir / "partition.json"
    document = json.loads(path.read_text())
    for change, problem in [
        (lambda d: d.pop("client_augment"), "missing key 'client_augment'"),
        (lambda d: d.update(client_indices="0,1,2"), "key 'client_indices' should be a list"),
        (lambda d: d["client_indices"][1].append(len(LABELS) + 3), "indices outside 0..119"),
        (lambda d: d["client_sizes"].reverse() or d["client_sizes"].append(1), "'client_sizes' do not match"),
    ]:
        damaged = json.loads(json.dumps(document))
        change(damaged)
        path.write_text(json.dumps(damaged))
        with pytest.raises(ArtifactError) as err:
            load_partition(partition_dir)
        check(err, path, problem)
    with pytest.raises(ArtifactError) as err:
        load_partition(partition_dir.parent / "absent")
    check(err, partition_dir.parent / "absent" / "partition.json", "does not exist")


def test_counts_csv_damaged(partition_dir: Path) -> None:
    path = partition_dir / "counts.csv"
    assert load_counts(partition_dir).sum() == len(LABELS) - load_partition(partition_dir).meta["unassigned"]
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-3]) + "\n")
    with pytest.raises(ArtifactError) as err:
        load_counts(partition_dir)
    check(err, path, "expected one row per (client, class) pair")
    path.write_text("\n".join(lines[:5] + ["2,3,"]) + "\n")
    with pytest.raises(ArtifactError) as err:
        load_counts(path)
    check(err, path, "not a valid counts table")


# --- graphs ----------------------------------------------------------------------------------------


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    graph = create_graph({"topology": "general", "connectivity": 3}, 6, 0)
    sizes = np.full(6, 10)
    path = tmp_path / "g" / "graph.json"
    save_graph(graph, {rule: mixing_matrix(graph.adjacency, rule, sizes) for rule in MIXING_SPECS.names()}, path)
    return path


def test_graph_json_truncated(graph_file: Path) -> None:
    truncate(graph_file)
    with pytest.raises(ArtifactError) as err:
        load_graph(graph_file)
    check(err, graph_file, "not valid JSON")


def test_graph_json_missing_key_or_bad_edges(graph_file: Path) -> None:
    record = json.loads(graph_file.read_text())
    for change, problem in [
        (lambda r: r.pop("edges"), "missing key 'edges'"),
        (lambda r: r["edges"].append([2, 9]), "edge [2, 9] is not a pair of distinct clients in 0..5"),
        (lambda r: r["mixing"].update(uniform=[[1.0]]), "mixing matrix 'uniform' should be 6 x 6"),
        (lambda r: r.update(num_clients="6"), "key 'num_clients' should be an integer"),
    ]:
        damaged = json.loads(json.dumps(record))
        change(damaged)
        graph_file.write_text(json.dumps(damaged))
        with pytest.raises(ArtifactError) as err:
            load_graph(graph_file)
        check(err, graph_file, problem)


# --- evaluation results ----------------------------------------------------------------------------


def test_result_json_truncated(tmp_path: Path) -> None:
    path = tmp_path / "fl" / "m" / "digits-finetune.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"framework": "fl", "test_acc": 0.8')
    with pytest.raises(ArtifactError) as err:
        load_results(tmp_path)
    check(err, path, "not valid JSON")
    path.write_text(json.dumps({"framework": "fl"}))
    with pytest.raises(ArtifactError) as err:
        load_results(tmp_path)
    check(err, path, "missing key 'model'")
    with pytest.raises(ArtifactError) as err:
        load_results(tmp_path / "absent")
    check(err, tmp_path / "absent", "does not exist")


# --- torch files (model weights) -------------------------------------------------------------------


def test_torch_weights_truncated_or_not_weights(tmp_path: Path) -> None:
    import torch

    path = tmp_path / "encoder.pt"
    state = {"layer.weight": torch.arange(6.0).reshape(2, 3), "layer.bias": torch.zeros(2)}
    torch.save(state, path)
    loaded = load_torch(path, required={"layer.weight": torch.Tensor})
    assert torch.equal(loaded["layer.weight"], state["layer.weight"])
    truncate(path)
    with pytest.raises(ArtifactError) as err:
        load_torch(path)
    check(err, path, "cannot be loaded as a torch file")
    torch.save({"weights": np.ones(3)}, path)  # a numpy array needs unpickling code: refused
    with pytest.raises(ArtifactError) as err:
        load_torch(path)
    check(err, path, "holds objects a weights-only load refuses")
    torch.save(state, path)
    with pytest.raises(ArtifactError) as err:
        load_torch(path, required=["head.weight"])
    check(err, path, "missing key 'head.weight'")


# --- nothing is written when a stage's input is damaged ---------------------------------------------


@pytest.fixture
def ci_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with the CI profile's prepared digits, stages not logging to MLflow."""
    from dssl.pipeline.common import Stage

    monkeypatch.chdir(tmp_path)
    for method in ("log", "log_runs"):
        if hasattr(Stage, method):
            monkeypatch.setattr(Stage, method, lambda self, *args, **kwargs: "no-tracking")
    from dssl.pipeline import prepare

    prepare.run("digits", CI_PARAMS)
    return tmp_path


def test_partition_stage_writes_nothing_from_a_truncated_npz(ci_project: Path) -> None:
    from dssl.pipeline import partition

    source = Path("data/prepared/digits/train.npz")
    truncate(source)
    with pytest.raises(ArtifactError) as err:
        partition.run(CI_PARAMS)
    check(err, source, "not a readable .npz archive")
    partitions = ci_project / "data" / "partitions"
    assert not partitions.exists() or not any(partitions.iterdir())  # no output, no temporary left


def test_graph_improve_stage_writes_nothing_from_a_damaged_base_graph(ci_project: Path) -> None:
    from dssl.pipeline import graph, graph_improve, partition
    from dssl.pipeline.common import graph_file

    partition.run(CI_PARAMS)
    graph.run(CI_PARAMS)
    truncate(graph_file("general-3"))
    with pytest.raises(ArtifactError) as err:
        graph_improve.run("general-3-plus2", CI_PARAMS)
    check(err, graph_file("general-3"), "not valid JSON")
    assert not graph_file("general-3-plus2").parent.exists()


# --- bit-stable floats -----------------------------------------------------------------------------


def test_stable_float_absorbs_last_bit_differences() -> None:
    for value in (1 / 3, 0.1 + 0.2, 2 / 3 * 1e-5, 123456.789, 1.5857864376269049):
        neighbours = {stable_float(np.nextafter(value, direction)) for direction in (-np.inf, np.inf)}
        assert neighbours == {stable_float(value)}
    assert stable_float(0.1 + 0.2) == 0.3
    assert json.dumps(stable_float(-2e-16)) == "0.0"  # noise around zero, and never -0.0
    assert stable_float(0.45958502, decimals=6) == 0.459585
    assert np.isnan(stable_float(float("nan")))
    assert stable_floats({"a": np.array([1 / 3, 1.0]), "b": (np.float64(2 / 3), 4), "c": "x"}) == {
        "a": [0.3333333333, 1.0], "b": [0.6666666667, 4], "c": "x"}

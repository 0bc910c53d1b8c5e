"""Loading and validation of result files; aggregation over seeds."""

from __future__ import annotations

import json
import math

import pytest
from report_helpers import result, write_results

from dssl.reporting.results import load_results, stray_results, summarise


def test_load_results_reads_every_json_recursively(tmp_path):
    records = [result("fl", scheme="iid"), result("random", None), result("central", seed=1)]
    df = load_results(write_results(tmp_path, records))
    assert len(df) == 3
    assert set(df["framework"]) == {"fl", "random", "central"}
    assert df["file"].str.endswith(".json").all()


def test_only_the_folders_of_the_current_stages_are_read(tmp_path):
    """A cell removed from the params leaves its results behind (DVC keeps a removed stage's outputs): the
    report reads the folders of the stages the params hold and no other file."""
    write_results(tmp_path, [result("fl", scheme="iid"), result("random", None)])   # fl/ and other/
    stray = sorted((tmp_path / "fl").glob("*.json"))
    assert stray_results(sorted(tmp_path.rglob("*.json")), [tmp_path / "other"]) == stray
    df = load_results(tmp_path, within=[tmp_path / "other"])
    assert list(df["framework"]) == ["random"]
    assert len(load_results(tmp_path)) == 2


def test_the_report_reads_the_result_folders_of_the_default_s_evaluation_stages():
    from pathlib import Path

    from dssl.config.params import read_params
    from dssl.pipeline.catalogue import instances, result_folders

    params = read_params(Path(__file__).resolve().parents[2] / "params.yaml")
    folders = result_folders(params)
    evaluations = [stage for stage in instances(params) if stage.name.startswith("evaluate_")]
    assert len(folders) == len(set(folders)) == len(evaluations)
    assert "reports/metrics/fl/mae-vit/fl-label/fedmar" in folders
    assert all(folder.startswith("reports/metrics/") for folder in folders)


def test_missing_key_names_the_file_and_the_key(tmp_path):
    record = result()
    del record["test_acc"]
    write_results(tmp_path, [record])
    with pytest.raises(ValueError, match=r"result-000\.json: missing key 'test_acc'"):
        load_results(tmp_path)


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    (json.dumps([1, 2]), "expected a JSON object"),
    (json.dumps(result(framework=3)), "key 'framework' must be a name"),
    (json.dumps(result(protocol="nearest")), "key 'protocol' is 'nearest'"),
    (json.dumps(result(n_test=0)), "key 'n_test' must be a positive integer"),
    (json.dumps(result(test_acc=84.3)), "key 'test_acc' must be a number in \\[0, 1\\]"),
    (json.dumps(result(seed="0")), "key 'seed' must be an integer"),
])
def test_malformed_file_is_a_clear_error(tmp_path, content, message):
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(ValueError, match=message) as err:
        load_results(tmp_path)
    assert "bad.json" in str(err.value)


def test_empty_folder_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no result files"):
        load_results(tmp_path)


def test_summarise_mean_interval_and_test_error_over_seeds(tmp_path):
    records = [result(test_acc=acc, seed=seed, n_test=400) for seed, acc in enumerate([0.80, 0.82, 0.84])]
    records.append(result(scheme="feature", test_acc=0.7))
    df = load_results(write_results(tmp_path, records))
    summary = summarise(df, ["partition"]).set_index("partition")
    iid = summary.loc["fl-iid"]
    assert iid["mean"] == pytest.approx(82.0)
    # sd = 2 pp, t_{0.975, 2} = 4.3027: half-width = 4.3027 * 2 / sqrt(3)
    assert iid["ci"] == pytest.approx(4.3027 * 2.0 / math.sqrt(3), abs=1e-3)
    assert iid["n"] == 3
    # Wilson half-width at p = 0.82, n = 400 (hand-computed with z = 1.95996)
    z, n, p = 1.959964, 400, 0.82
    expected = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert iid["test_ci"] == pytest.approx(100 * expected, rel=1e-6)
    assert [run[0] for run in iid["runs"]] == [0, 1, 2]
    feature = summary.loc["fl-feature"]
    assert feature["n"] == 1 and math.isnan(feature["ci"]) and math.isnan(feature["test_ci"])


def test_none_stays_none_and_extra_keys_are_ignored(tmp_path):
    df = load_results(write_results(tmp_path, [result("random", None, selected={"lr": 0.1}), result("fl")]))
    assert "selected" not in df.columns
    random = df[df["framework"] == "random"].iloc[0]
    assert random["model"] is None and random["partition"] is None and random["n_test"] is None
    assert list(summarise(df, ["partition"])["partition"]) == ["fl-iid", None]

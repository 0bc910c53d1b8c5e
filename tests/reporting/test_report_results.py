"""Loading and validation of result files; aggregation over seeds."""

from __future__ import annotations

import json
import math

import pytest
from report_helpers import result, write_results

from dssl.reporting.results import load_results, pooled_std, summarise, within_noise


def test_load_results_reads_every_json_recursively(tmp_path):
    records = [result("fl", scheme="iid"), result("random", None), result("central", seed=1)]
    df = load_results(write_results(tmp_path, records))
    assert len(df) == 3
    assert set(df["framework"]) == {"fl", "random", "central"}
    assert df["file"].str.endswith(".json").all()


def test_missing_key_names_the_file_and_the_key(tmp_path):
    record = result()
    del record["test_acc"]
    write_results(tmp_path, [record])
    with pytest.raises(ValueError, match=r"result-000\.json: missing key 'test_acc'"):
        load_results(tmp_path)


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    (json.dumps([1, 2]), "expected a JSON object"),
    (json.dumps(result(framework="gossip")), "key 'framework' is 'gossip'"),
    (json.dumps(result(protocol="knn")), "key 'protocol' is 'knn'"),
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


def test_summarise_mean_std_n_over_seeds(tmp_path):
    records = [result(test_acc=acc, seed=seed) for seed, acc in enumerate([0.80, 0.82, 0.84])]
    records.append(result(scheme="feature", test_acc=0.7))
    df = load_results(write_results(tmp_path, records))
    summary = summarise(df, ["partition"]).set_index("partition")
    assert summary.loc["fl-iid", "mean"] == pytest.approx(82.0)
    assert summary.loc["fl-iid", "std"] == pytest.approx(2.0)
    assert summary.loc["fl-iid", "n"] == 3
    assert [run[0] for run in summary.loc["fl-iid", "runs"]] == [0, 1, 2]
    assert summary.loc["fl-feature", "n"] == 1
    assert math.isnan(summary.loc["fl-feature", "std"])


def test_none_stays_none_and_extra_keys_are_ignored(tmp_path):
    df = load_results(write_results(tmp_path, [result("random", None, selected={"lr": 0.1}), result("fl")]))
    assert "selected" not in df.columns
    random = df[df["framework"] == "random"].iloc[0]
    assert random["model"] is None and random["partition"] is None
    assert list(summarise(df, ["partition"])["partition"]) == ["fl-iid", None]


def test_pooled_std_and_seed_noise():
    assert pooled_std([1.0, 3.0], [3, 3]) == pytest.approx(math.sqrt(5.0))
    assert pooled_std([math.nan, 2.0], [1, 4]) == pytest.approx(2.0)
    assert pooled_std([math.nan], [1]) is None
    assert within_noise(1.5, [1.0, 3.0], [3, 3]) is True
    assert within_noise(-2.5, [1.0, 3.0], [3, 3]) is False
    assert within_noise(0.1, [math.nan, math.nan], [1, 1]) is None

"""Paper A's Table 1 from measured results, the paper's Table 1, and the linear-probe table."""

from __future__ import annotations

import pandas as pd
import pytest
from report_helpers import result, write_results

from dssl.reporting.results import load_results
from dssl.reporting.tables import (
    format_drop, linear_probe_table, load_paper_numbers, noniid_drops, paper_table1_cells, table1,
    table1_cells, table1_csv, table1_markdown,
)


def fl_runs(method: str, backbone: str, iid: float, label: float, feature: float, seed: int = 0) -> list[dict]:
    return [result("fl", method, backbone, scheme, test_acc=acc, seed=seed)
            for scheme, acc in (("iid", iid), ("dirichlet_balanced", label), ("feature", feature))]


@pytest.fixture
def paper_like(tmp_path) -> pd.DataFrame:
    """FL runs in the order MAE first (the table must reorder), plus random-init and central references."""
    records = [
        *fl_runs("mae", "vit_small", 0.6990, 0.6820, 0.6932),
        *fl_runs("mae_cnn", "cnn_small", 0.8728, 0.8697, 0.8617),
        *fl_runs("simsiam", "cnn_small", 0.8603, 0.8433, 0.8703),
        result("random", None, "cnn_small", test_acc=0.4012),
        result("central", "simsiam", "cnn_small", test_acc=0.9011),
    ]
    return load_results(write_results(tmp_path, records))


def test_cell_format_and_drop_on_hand_computed_values(paper_like):
    table = table1(paper_like)
    assert table.loc["SimSiam + CNN", "Digits IID"] == "86.03"
    assert table.loc["SimSiam + CNN", "Digits L/non-IID"] == "84.33 (↓1.70)"
    assert table.loc["SimSiam + CNN", "Digits F/non-IID"] == "87.03 (↑1.00)"
    assert table.loc["MAE + CNN", "Digits L/non-IID"] == "86.97 (↓0.31)"


def test_rows_in_paper_order_then_references_in_the_iid_column_only(paper_like):
    table = table1(paper_like)
    assert list(table.index) == ["SimSiam + CNN", "MAE + CNN", "MAE + ViT",
                                 "random init + CNN", "central SimSiam + CNN"]
    assert list(table.columns) == ["Digits IID", "Digits L/non-IID", "Digits F/non-IID"]
    assert table.loc["random init + CNN"].tolist() == ["40.12", "", ""]
    assert table.loc["central SimSiam + CNN"].tolist() == ["90.11", "", ""]


def test_format_drop_signs():
    assert format_drop(-1.7) == "(↓1.70)"
    assert format_drop(0.4) == "(↑0.40)"
    assert format_drop(0.0) == "(0.00)"


def test_seeds_give_mean_std_and_n_in_the_cell(tmp_path):
    records = [*fl_runs("simsiam", "cnn_small", 0.80, 0.78, 0.80, seed=0),
               *fl_runs("simsiam", "cnn_small", 0.84, 0.80, 0.82, seed=1)]
    df = load_results(write_results(tmp_path, records))
    table = table1(df)
    # IID: mean 82, std sqrt(8) = 2.83; L: 79 +- 1.41; F: 81 +- 1.41
    assert table.loc["SimSiam + CNN", "Digits IID"] == "82.00 ± 2.83 [n=2]"
    assert table.loc["SimSiam + CNN", "Digits L/non-IID"] == "79.00 ± 1.41 (↓3.00) [n=2]"
    drops = noniid_drops(table1_cells(df)).set_index("setting")
    # pooled std sqrt((8 + 2) / 2) = 2.24: a drop of 3 is beyond seed noise, a drop of 1 within it
    assert drops.loc["L/non-IID", "drop"] == pytest.approx(-3.0)
    assert not drops.loc["L/non-IID", "within_noise"]
    assert drops.loc["F/non-IID", "drop"] == pytest.approx(-1.0)
    assert drops.loc["F/non-IID", "within_noise"]


def test_min_size_dirichlet_fills_the_cell_only_without_the_balanced_one(tmp_path):
    records = [result(scheme="iid", test_acc=0.9), result(scheme="dirichlet_min_size", test_acc=0.7)]
    write_results(tmp_path / "a", records)
    assert table1(load_results(tmp_path / "a")).loc["SimSiam + CNN", "Digits L/non-IID"] == "70.00 (↓20.00)"
    write_results(tmp_path / "b", [*records, result(scheme="dirichlet_balanced", test_acc=0.8)])
    assert table1(load_results(tmp_path / "b")).loc["SimSiam + CNN", "Digits L/non-IID"] == "80.00 (↓10.00)"


def test_a_cell_mixing_models_is_an_error(tmp_path):
    records = [result(test_acc=0.8), result(test_acc=0.7, model="simsiam-resnet", backbone="resnet18_imagenet")]
    with pytest.raises(ValueError, match="mixes models"):
        table1(load_results(write_results(tmp_path, records)))


def test_a_repeated_seed_is_an_error(tmp_path):
    records = [result(test_acc=0.8), result(test_acc=0.7, stage="evaluate_fl@again")]
    with pytest.raises(ValueError, match="seed 0 more than once"):
        table1(load_results(write_results(tmp_path, records)))


def test_paper_table1_drops_match_the_paper():
    cells = paper_table1_cells(load_paper_numbers())
    drops = noniid_drops(cells).set_index(["row", "dataset", "setting"])["drop"]
    assert drops[("SimSiam + CNN", "cifar10", "L/non-IID")] == pytest.approx(-1.70)
    assert drops[("SimSiam + ViT", "cifar100", "F/non-IID")] == pytest.approx(-5.53)
    assert len(drops) == 24


def test_markdown_shows_measured_and_paper_for_the_same_rows(paper_like):
    text = table1_markdown(table1(paper_like), load_paper_numbers())
    measured, paper = text.split("**Paper A, Table 1**")
    assert "84.33 (↓1.70)" in measured and "| random init + CNN | 40.12 |" in measured
    assert "| SimSiam + CNN | 86.03 | 84.33 (↓1.70) | 84.62 (↓1.41) |" in paper
    assert "| MAE + ViT | 69.90 |" in paper
    assert "SimSiam + ViT" not in paper        # not measured, so not shown
    assert "random init" not in paper


def test_csv_export_has_numbers_drops_and_lineage(paper_like, tmp_path):
    out = pd.read_csv(table1_csv(paper_like, tmp_path / "table1.csv"))
    row = out[(out["row"] == "SimSiam + CNN") & (out["setting"] == "L/non-IID")].iloc[0]
    assert row["mean"] == pytest.approx(84.33)
    assert row["drop"] == pytest.approx(-1.70)
    assert "evaluate_fl@simsiam-cnn-fl-label-digits-finetune" in row["runs"]


def test_linear_probe_table_compares_with_random_init_of_the_same_family(tmp_path):
    records = [
        result("fl", "simsiam", "cnn_small", "iid", protocol="linear_probe", test_acc=0.7),
        result("central", "mae", "vit_small", protocol="linear_probe", test_acc=0.5),
        result("fl", "mae", "vit_small", "iid", protocol="linear_probe", test_acc=0.61, seed=0),
        result("fl", "mae", "vit_small", "iid", protocol="linear_probe", test_acc=0.63, seed=1),
        result("random", None, "cnn_small", protocol="linear_probe", test_acc=0.55),
        result("random", None, "vit_small", protocol="linear_probe", test_acc=0.60, seed=0),
        result("random", None, "vit_small", protocol="linear_probe", test_acc=0.64, seed=1),
    ]
    table = linear_probe_table(load_results(write_results(tmp_path, records)))
    verdicts = table.set_index(["model", "framework"])["SSL beats random init?"]
    assert verdicts[("simsiam-cnn", "fl")] == "yes (+15.00)"
    assert verdicts[("mae-vit", "central")] == "no (-12.00)"
    # 62 +- 1.41 vs 62 +- 2.83: margin 0, pooled std > 0
    assert verdicts[("mae-vit", "fl")] == "no (+0.00, within seed noise)"
    assert list(table["framework"]) == ["central", "fl", "fl"]


def test_linear_probe_without_a_random_init_run_says_so(tmp_path):
    df = load_results(write_results(tmp_path, [result(protocol="linear_probe", test_acc=0.7)]))
    assert linear_probe_table(df)["SSL beats random init?"].tolist() == ["n/a (no random-init run)"]


def test_columns_per_dataset_in_paper_order_with_lineage_order(tmp_path):
    records = [result(scheme=s, dataset=d, test_acc=0.5) for d in ("cifar10", "digits") for s in ("feature", "iid")]
    cells = table1_cells(load_results(write_results(tmp_path, records)))
    assert list(table1(load_results(tmp_path)).columns) == ["Digits IID", "Digits F/non-IID",
                                                            "CIFAR-10 IID", "CIFAR-10 F/non-IID"]
    assert list(zip(cells["dataset"], cells["setting"])) == [("digits", "IID"), ("digits", "F/non-IID"),
                                                             ("cifar10", "IID"), ("cifar10", "F/non-IID")]

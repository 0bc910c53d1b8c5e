"""Paper A's Fig. 2a: the claim checks on measured runs and the figure file."""

from __future__ import annotations

import pytest
from report_helpers import decl_result, result, write_results

from dssl.reporting.figures import claims_fig2a, figure2a
from dssl.reporting.results import load_results


def grid(uniform: list[float], general: list[float], complete: float, seed: int = 0) -> list[dict]:
    """DecL results at |A| = 3, 5, 10 for both topologies and the complete graph (|A| = 20)."""
    return [
        *(decl_result("uniform", c, acc, seed) for c, acc in zip((3, 5, 10), uniform)),
        *(decl_result("general", c, acc, seed) for c, acc in zip((3, 5, 10), general)),
        decl_result("complete", 20, complete, seed),
    ]


def test_claims_on_monotone_runs(tmp_path):
    df = load_results(write_results(tmp_path, grid([0.70, 0.75, 0.80], [0.68, 0.72, 0.79], 0.85)))
    claims = claims_fig2a(df)
    assert (claims["dataset"], claims["model"], claims["partition"]) == ("digits", "mae-vit", "decl-label")
    uniform = claims["topologies"]["uniform"]
    assert uniform["connectivity"] == [3.0, 5.0, 10.0]
    assert uniform["accuracy"] == pytest.approx([70.0, 75.0, 80.0])
    assert uniform["non_decreasing"] is True
    assert uniform["spearman_rho"] == pytest.approx(1.0)
    assert claims["topologies"]["general"]["non_decreasing"] is True
    assert claims["fl"]["accuracy"] == pytest.approx(85.0)
    assert claims["fl_never_below_decl"] is True
    assert claims["fl_shortfalls"] == []


def test_claims_on_non_monotone_runs_with_fl_below_a_decl_point(tmp_path):
    df = load_results(write_results(tmp_path, grid([0.70, 0.75, 0.80], [0.70, 0.78, 0.74], 0.77)))
    claims = claims_fig2a(df, dataset="digits")
    general = claims["topologies"]["general"]
    assert general["non_decreasing"] is False
    assert general["spearman_rho"] == pytest.approx(0.5)
    assert general["decreases"] == [{"from": 5.0, "to": 10.0, "change": -4.0, "within_noise": None}]
    assert claims["fl_never_below_decl"] is False
    assert [(s["topology"], s["connectivity"], s["gap"]) for s in claims["fl_shortfalls"]] == [
        ("general", 5.0, pytest.approx(1.0)), ("uniform", 10.0, pytest.approx(3.0))]


def test_decrease_within_seed_noise_is_flagged(tmp_path):
    records = [*grid([0.70, 0.80, 0.79], [0.70, 0.75, 0.80], 0.90, seed=0),
               *grid([0.72, 0.76, 0.77], [0.70, 0.75, 0.80], 0.90, seed=1)]
    claims = claims_fig2a(load_results(write_results(tmp_path, records)))
    # uniform means 71, 78, 78 -> flat within noise; at |A| = 10 the step 5 -> 10 is 0.0 (non-decreasing)
    assert claims["topologies"]["uniform"]["non_decreasing"] is True
    assert claims["topologies"]["uniform"]["n"] == [2, 2, 2]
    records = [*grid([0.70, 0.80, 0.78], [0.70, 0.75, 0.80], 0.90, seed=0),
               *grid([0.72, 0.76, 0.77], [0.70, 0.75, 0.80], 0.90, seed=1)]
    claims = claims_fig2a(load_results(write_results(tmp_path / "b", records)))
    # 78.0 +- 2.83 then 77.5 +- 0.71: a fall of 0.5 pp, smaller than the pooled std 2.06
    (fall,) = claims["topologies"]["uniform"]["decreases"]
    assert fall["change"] == pytest.approx(-0.5)
    assert fall["within_noise"] is True


def test_no_complete_graph_leaves_the_fl_claim_open(tmp_path):
    df = load_results(write_results(tmp_path, grid([0.7, 0.8, 0.9], [0.7, 0.8, 0.9], 0.9)[:-1]))
    claims = claims_fig2a(df)
    assert claims["fl"] is None and claims["fl_never_below_decl"] is None


def test_several_models_need_a_choice(tmp_path):
    records = [*grid([0.7, 0.8, 0.9], [0.7, 0.8, 0.9], 0.9),
               decl_result("uniform", 3, 0.6, model="simsiam-vit")]
    df = load_results(write_results(tmp_path, records))
    with pytest.raises(ValueError, match="pass model="):
        claims_fig2a(df)
    assert claims_fig2a(df, model="simsiam-vit")["topologies"]["uniform"]["accuracy"] == [pytest.approx(60.0)]


def test_no_decl_results_is_an_error(tmp_path):
    df = load_results(write_results(tmp_path, [result()]))
    with pytest.raises(ValueError, match="no DecL fine-tune results"):
        claims_fig2a(df)


def test_figure_is_written_and_deterministic(tmp_path):
    records = [*grid([0.70, 0.75, 0.80], [0.70, 0.78, 0.74], 0.85, seed=0),
               *grid([0.72, 0.74, 0.81], [0.69, 0.77, 0.76], 0.86, seed=1)]
    df = load_results(write_results(tmp_path / "results", records))
    first = figure2a(df, tmp_path / "a.png", "digits")
    second = figure2a(df, tmp_path / "b.png", "digits")
    assert first.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert first.stat().st_size > 10_000
    assert first.read_bytes() == second.read_bytes()

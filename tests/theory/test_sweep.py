"""Theory sweep: rows, validation, determinism, summaries and claim checks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dssl.theory.improvement_study import build_theory_model, run_improvement_study
from dssl.theory.options import resolve_theory_cfg
from dssl.theory.sweep import ROW_COLUMNS, run_theory_sweep, summarise
from dssl.theory.theorems import claim_checks
from dssl.theory.objectives import decl_global_weights

from theory_helpers import complete_graph, cycle_graph, path_graph

N = 4
SMALL_CFG = {
    "N": N, "c": 2 * N, "d_values": [16, 32], "seeds": [0, 1], "n_jobs": 1,
    "H": {"kind": "blend", "weight": 0.5, "shift": 1},
}


def small_graphs() -> dict[str, dict]:
    paw = path_graph(N)
    paw[0, 2] = paw[2, 0] = True  # |A| = (3, 3, 4, 2)
    return {
        "path": {"adjacency": path_graph(N), "topology": "general", "connectivity": 2.5},
        "paw": {"adjacency": paw, "topology": "general", "connectivity": 3.0},
        "cycle": {"adjacency": cycle_graph(N), "topology": "uniform", "connectivity": 3.0},
        "complete": {"adjacency": complete_graph(N), "topology": "complete", "connectivity": 4.0},
    }


@pytest.fixture(scope="module")
def sweep_df() -> pd.DataFrame:
    return run_theory_sweep(SMALL_CFG, small_graphs())


def test_rows_and_columns(sweep_df):
    assert list(sweep_df.columns) == ROW_COLUMNS
    # per (d, seed, method): local + fl + one decl row per graph
    assert len(sweep_df) == 2 * 2 * 3 * (2 + 4)
    assert set(sweep_df["framework"]) == {"local", "decl", "fl"}
    assert set(sweep_df["method"]) == {"cl", "cl_h", "mim"}
    assert sweep_df["sensitivity"].between(0, 1).all() and sweep_df["sensitivity_N"].between(0, 1).all()


def test_regular_and_complete_decl_equal_fl(sweep_df):
    fl = sweep_df[sweep_df["framework"] == "fl"].set_index(["d", "seed", "method"])["sensitivity"]
    for graph in ("cycle", "complete"):
        dec = sweep_df[sweep_df["graph"] == graph].set_index(["d", "seed", "method"])["sensitivity"]
        pd.testing.assert_series_equal(dec.sort_index(), fl.sort_index(), check_names=False)


def test_sweep_is_deterministic(sweep_df):
    again = run_theory_sweep(SMALL_CFG, small_graphs())
    pd.testing.assert_frame_equal(again, sweep_df)
    other = run_theory_sweep({**SMALL_CFG, "seeds": [7]}, small_graphs())
    seed0 = sweep_df[sweep_df["seed"] == 0]["sensitivity"].to_numpy()
    assert not np.allclose(other["sensitivity"].to_numpy(), seed0)


def test_n_mismatch_is_named():
    graphs = {"big": {"adjacency": cycle_graph(N + 1), "topology": "uniform", "connectivity": 3.0}}
    with pytest.raises(ValueError, match=r"graph 'big' has 5 clients but cfg N = 4"):
        run_theory_sweep(SMALL_CFG, graphs)


def test_cfg_validation():
    with pytest.raises(ValueError, match="c=4 must be >= 2N=8"):
        resolve_theory_cfg({"N": 4, "c": 4, "d_values": [16]})
    with pytest.raises(ValueError, match="unknown theory cfg key 'sample_sizes.gamma'"):
        resolve_theory_cfg({"sample_sizes": {"gamma": 1}})
    with pytest.raises(ValueError, match="A.9"):
        run_theory_sweep({**SMALL_CFG, "H": {"kind": "shift", "shift": 1}}, small_graphs())


def test_summarise(sweep_df):
    summary = summarise(sweep_df)
    assert {"mean", "std", "min", "max", "n_seeds"} <= set(summary.columns)
    assert (summary["n_seeds"] == 2).all()
    assert (summary["min"] <= summary["mean"] + 1e-15).all() and (summary["mean"] <= summary["max"] + 1e-15).all()


def test_claim_checks_structure_and_logic(sweep_df):
    checks = claim_checks(sweep_df)
    ids = {c["claim_id"] for c in checks}
    assert "thm4.4[fl,cl>mim]" in ids and "thm4.4[decl,cl_h>mim]" in ids
    assert "cor4.5[decl,mim,general]" in ids and "thm4.6[decl,cl,uniform]" in ids
    for check in checks:
        assert set(check["holds_by_d"]) == {16, 32}
        first = check["holds_from_d"]
        if first is None:
            assert not check["holds_by_d"][32]
        else:
            assert all(check["holds_by_d"][d] for d in (16, 32) if d >= first)
    # uniform DecL equals FL, so Theorem 4.6 holds with a zero margin there
    uniform = next(c for c in checks if c["claim_id"] == "thm4.6[decl,mim,uniform]")
    assert all(uniform["holds_by_d"].values())
    assert max(abs(v) for v in uniform["margin_by_d"].values()) < 1e-9


def test_claim_checks_on_synthetic_frame():
    rows = []
    for d, s_cl, s_mim in [(8, 0.1, 0.2), (16, 0.3, 0.2), (32, 0.4, 0.1)]:
        for method, s in (("cl", s_cl), ("mim", s_mim)):
            rows.append({"d": d, "seed": 0, "method": method, "framework": "fl", "graph": "fl",
                         "topology": "complete", "connectivity": 4.0, "sensitivity": s})
    check = claim_checks(pd.DataFrame(rows))[0]
    assert check["claim_id"] == "thm4.4[fl,cl>mim]"
    assert check["holds_by_d"] == {8: False, 16: True, 32: True} and check["holds_from_d"] == 16


def test_theory_model_matches_sweep(sweep_df):
    model = build_theory_model({**SMALL_CFG, "d": 16, "seed": 1, "method": "cl"}, N)
    paw = small_graphs()["paw"]["adjacency"]
    s = model.sensitivity(decl_global_weights(paw))
    expected = sweep_df.query("d == 16 and seed == 1 and method == 'cl' and graph == 'paw'")["sensitivity"]
    assert s == pytest.approx(float(expected.iloc[0]), abs=1e-12)
    batched = model.batched_sensitivity(np.stack([decl_global_weights(paw), np.full(N, 1 / N)]))
    assert batched[0] == pytest.approx(s, abs=1e-9)


def test_improvement_study_rows():
    cfg = {**SMALL_CFG, "improvement": {"d": 16, "k": 2, "seeds": [0], "graphs": ["path"]}}
    df = run_improvement_study(cfg, small_graphs())
    assert set(df["criterion"]) == {"sensitivity", "algebraic_connectivity", "min_degree", "random"}
    assert set(df["step"]) == {0, 1, 2}
    assert df["sensitivity"].notna().all() and df["heldout_sensitivity"].notna().all()
    assert not np.allclose(df["sensitivity"], df["heldout_sensitivity"])  # an independent draw


def test_parallel_sweep_matches_serial(sweep_df):
    parallel = run_theory_sweep({**SMALL_CFG, "n_jobs": 2}, small_graphs())
    pd.testing.assert_frame_equal(parallel, sweep_df, check_exact=False, rtol=1e-10, atol=1e-12)

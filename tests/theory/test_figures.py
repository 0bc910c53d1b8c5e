"""Figures render, and render identically twice."""

from __future__ import annotations

import pandas as pd

from dssl.theory.figures import plot_improvement, plot_sensitivity_vs_connectivity, plot_sensitivity_vs_d


def _sweep_frame() -> pd.DataFrame:
    rows = []
    for d in (16, 32, 64):
        for seed in (0, 1):
            for method, base in (("cl", 0.5), ("cl_h", 0.4), ("mim", 0.2)):
                rows.append(dict(d=d, seed=seed, method=method, framework="fl", graph="fl", topology="complete",
                                 connectivity=6.0, sensitivity=base / d * 16))
                rows.append(dict(d=d, seed=seed, method=method, framework="local", graph="local", topology="none",
                                 connectivity=1.0, sensitivity=base + 0.1))
                for topo in ("uniform", "general"):
                    for conn in (3.0, 5.0):
                        rows.append(dict(d=d, seed=seed, method=method, framework="decl", graph=f"{topo}-{conn}",
                                         topology=topo, connectivity=conn,
                                         sensitivity=base + 0.1 / conn + 0.01 * seed))
    return pd.DataFrame(rows)


def _improve_frame() -> pd.DataFrame:
    rows = []
    for seed in (0, 1):
        for criterion in ("sensitivity", "algebraic_connectivity", "min_degree", "random"):
            for step in range(4):
                rows.append(dict(graph="general-3", criterion=criterion, seed=seed, step=step, d=32, method="cl",
                                 sensitivity=0.5 - 0.01 * step * (criterion != "random") + 0.001 * seed))
    return pd.DataFrame(rows)


def test_figures_written_and_deterministic(tmp_path):
    df, imp = _sweep_frame(), _improve_frame()
    outputs = []
    for run in ("a", "b"):
        outputs.append([
            plot_sensitivity_vs_d(df, tmp_path / run / "s_vs_d.png").read_bytes(),
            plot_sensitivity_vs_connectivity(df, tmp_path / run / "s_vs_A.png").read_bytes(),
            plot_improvement(imp, tmp_path / run / "improve.png").read_bytes(),
        ])
    assert all(len(b) > 1000 for b in outputs[0])
    assert outputs[0] == outputs[1]

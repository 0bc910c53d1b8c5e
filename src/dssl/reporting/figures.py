"""Paper A's Fig. 2a: DecL fine-tune accuracy against average connectivity |A|, with the FL line.

Paper A (FedMAR, ICLR 2026), Fig. 2a: 20 clients, |A| in {3, 5, 10, 20 (= FL)}, uniform and general
topologies, CIFAR-100 fine-tuning; the values are given only in the figure, so no paper numbers are drawn.
In this pipeline the FL reference is the DecL run on the complete graph: with uniform mixing that is FedAvg
with all clients participating and uniform weights.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
from scipy.stats import spearmanr

from dssl.reporting.results import summarise, within_noise

FIG2A_PAPER_CLAIM = "paper: accuracy rises with |A|; FL never below DecL"
FL_LABEL = "FL (complete graph)"
TOPOLOGIES = ("uniform", "general")


def fig2a_runs(df: pd.DataFrame, dataset: str | None = None, model: str | None = None,
               partition: str | None = None) -> tuple[pd.DataFrame, dict[str, str]]:
    """The DecL fine-tune runs of one (dataset, model, partition) and that selection.

    A selector left as None must have a single value in the results; raises ValueError otherwise.
    """
    runs = df[(df["framework"] == "decl") & (df["protocol"] == "finetune")]
    if runs.empty:
        raise ValueError("no DecL fine-tune results: Fig. 2a needs evaluate runs with framework 'decl'")
    selection = {}
    for key, wanted in (("dataset", dataset), ("model", model), ("partition", partition)):
        selection[key] = _select(runs[key], wanted, key)
        runs = runs[runs[key] == selection[key]]
    return runs, selection


def _select(values: pd.Series, wanted: str | None, what: str) -> str:
    available = sorted(set(values.dropna()))
    if wanted is not None:
        if wanted not in available:
            raise ValueError(f"no DecL fine-tune results for {what} {wanted!r}; available: {available}")
        return wanted
    if len(available) != 1:
        raise ValueError(f"DecL fine-tune results cover {what}s {available}; pass {what}= to choose one")
    return available[0]


def _points(runs: pd.DataFrame) -> pd.DataFrame:
    points = summarise(runs[runs["topology"].isin(TOPOLOGIES)], ["topology", "connectivity"])
    return points.sort_values(["topology", "connectivity"], kind="stable")


def _fl_reference(runs: pd.DataFrame) -> dict[str, Any] | None:
    complete = summarise(runs[runs["topology"] == "complete"], ["topology"])
    if complete.empty:
        return None
    fl = complete.iloc[0]
    return {"accuracy": fl["mean"], "std": fl["std"], "n": int(fl["n"])}


def claims_fig2a(df: pd.DataFrame, dataset: str | None = None, model: str | None = None,
                 partition: str | None = None) -> dict[str, Any]:
    """Checks of paper A's Fig. 2a claims on measured runs, as data for the README.

    Per topology: accuracy (%) per |A|, whether it is non-decreasing in |A| (on two-decimal means),
    Spearman rho, and each decrease with its seed-noise flag (None when no std exists). Overall: the FL
    (complete graph) reference, whether it is at or above every DecL point, and the points above it.
    """
    runs, selection = fig2a_runs(df, dataset, model, partition)
    points = _points(runs)
    fl = _fl_reference(runs)
    return {
        **selection,
        "topologies": {topology: _topology_claims(points[points["topology"] == topology])
                       for topology in TOPOLOGIES if topology in set(points["topology"])},
        "fl": fl,
        **_fl_claims(points, fl),
    }


def _topology_claims(points: pd.DataFrame) -> dict[str, Any]:
    rows = list(points.itertuples())
    decreases = [
        {"from": a.connectivity, "to": b.connectivity, "change": round(b.mean - a.mean, 2),
         "within_noise": within_noise(b.mean - a.mean, [a.std, b.std], [a.n, b.n])}
        for a, b in zip(rows, rows[1:]) if round(b.mean - a.mean, 2) < 0
    ]
    return {
        "connectivity": [float(p.connectivity) for p in rows],
        "accuracy": [float(p.mean) for p in rows],
        "std": [float(p.std) for p in rows],
        "n": [int(p.n) for p in rows],
        "non_decreasing": not decreases,
        "spearman_rho": _spearman([p.connectivity for p in rows], [p.mean for p in rows]),
        "decreases": decreases,
    }


def _spearman(x: list[float], y: list[float]) -> float | None:
    if len(x) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: rho is undefined, reported as None
        rho = float(spearmanr(x, y).statistic)
    return None if math.isnan(rho) else rho


def _fl_claims(points: pd.DataFrame, fl: dict[str, Any] | None) -> dict[str, Any]:
    if fl is None or points.empty:
        return {"fl_never_below_decl": None, "fl_shortfalls": []}
    shortfalls = [
        {"topology": p.topology, "connectivity": float(p.connectivity), "gap": round(p.mean - fl["accuracy"], 2),
         "within_noise": within_noise(p.mean - fl["accuracy"], [p.std, fl["std"]], [p.n, fl["n"]])}
        for p in points.itertuples() if round(p.mean - fl["accuracy"], 2) > 0
    ]
    return {"fl_never_below_decl": not shortfalls, "fl_shortfalls": shortfalls}


def figure2a(df: pd.DataFrame, out_png: Path | str, dataset: str, model: str | None = None,
             partition: str | None = None) -> Path:
    """Draw Fig. 2a: DecL fine-tune accuracy vs |A| per topology (mean, seed std bars) and the FL line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    runs, selection = fig2a_runs(df, dataset, model, partition)
    decl = runs[runs["topology"].isin(TOPOLOGIES)].assign(accuracy=100.0 * runs["test_acc"].astype(float))
    fl = _fl_reference(runs)
    with sns.axes_style("whitegrid"):
        fig, ax = plt.subplots(figsize=(5.5, 4.0), dpi=120)
        if not decl.empty:
            order = [t for t in TOPOLOGIES if t in set(decl["topology"])]
            sns.lineplot(data=decl, x="connectivity", y="accuracy", hue="topology", style="topology",
                         hue_order=order, style_order=order, markers=True, dashes=False, errorbar="sd",
                         err_style="bars", ax=ax)
            ax.set_xticks(sorted(set(decl["connectivity"].astype(float))))
        if fl is not None:
            ax.axhline(fl["accuracy"], linestyle="--", color="0.3", label=FL_LABEL)
        ax.set_xlabel("average connectivity |A| (self included)")
        ax.set_ylabel("fine-tune top-1 accuracy (%)")
        ax.set_title(f"DecL on {selection['dataset']} ({selection['model']}, {selection['partition']})\n"
                     f"{FIG2A_PAPER_CLAIM}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out_png = Path(out_png)
        fig.savefig(out_png, format="png", dpi=120, metadata={"Software": None})
        plt.close(fig)
    return out_png

"""Paper A's Fig. 2a: DecL fine-tune accuracy against average connectivity |A|, with the FL line.

Paper A (FedMAR, ICLR 2026), Fig. 2a: 20 clients, |A| in {3, 5, 10, 20 (= FL)}, uniform and general
topologies, CIFAR-100 fine-tuning; the values are given only in the figure, so no paper numbers are drawn.
In this pipeline the FL reference is the DecL run on the complete graph: with uniform mixing that is FedAvg
with all clients participating and uniform weights.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dssl.reporting.results import summarise

FIG2A_PAPER_CLAIM = "paper: accuracy rises with |A|; FL never below DecL"
FL_LABEL = "FL (complete graph)"
TOPOLOGIES = ("uniform", "general")


def fig2a_runs(df: pd.DataFrame, dataset: str | None = None, model: str | None = None,
               partition: str | None = None, protocol: str = "finetune",
               strategy: str | None = None) -> tuple[pd.DataFrame, dict[str, str]]:
    """The DecL runs of one (dataset, model, partition, strategy entry) evaluated with ``protocol``.

    A selector left as None must have a single value in the results; raises ValueError otherwise.
    Results written before strategies existed have no strategy and pass any ``strategy`` selector.
    """
    runs = df[(df["framework"] == "decl") & (df["protocol"] == protocol)]
    if strategy is not None and "strategy" in runs:
        runs = runs[runs["strategy"].isna() | (runs["strategy"] == strategy)]
    if runs.empty:
        raise ValueError(f"no DecL {protocol} results: Fig. 2a needs evaluate runs with framework 'decl'")
    selection = {}
    for key, wanted in (("dataset", dataset), ("model", model), ("partition", partition)):
        selection[key] = _select(runs[key], wanted, key)
        runs = runs[runs[key] == selection[key]]
    return runs, selection


def _select(values: pd.Series, wanted: str | None, what: str) -> str:
    available = sorted(set(values.dropna()))
    if wanted is not None:
        if wanted not in available:
            raise ValueError(f"no DecL results for {what} {wanted!r}; available: {available}")
        return wanted
    if len(available) != 1:
        raise ValueError(f"DecL results cover {what}s {available}; set the section's {what} option to choose one")
    return available[0]


def figure2a(df: pd.DataFrame, out_png: Path | str, dataset: str, model: str | None = None,
             partition: str | None = None, protocol: str = "finetune", strategy: str | None = None) -> Path:
    """Draw Fig. 2a: DecL fine-tune accuracy vs |A| per topology (mean, 95 % seed-interval bars), FL line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    runs, selection = fig2a_runs(df, dataset, model, partition, protocol, strategy)
    points = summarise(runs[runs["topology"].isin(TOPOLOGIES)], ["topology", "connectivity"])
    complete = summarise(runs[runs["topology"] == "complete"], ["topology"])
    with sns.axes_style("whitegrid"):
        fig, ax = plt.subplots(figsize=(5.5, 4.0), dpi=120)
        for topology, marker in zip(TOPOLOGIES, "os"):
            line = points[points["topology"] == topology].sort_values("connectivity")
            if not line.empty:
                ax.errorbar(line["connectivity"], line["mean"], yerr=line["ci"].fillna(0.0), marker=marker,
                            capsize=3, label=topology)
        if not points.empty:
            ax.set_xticks(sorted(set(points["connectivity"].astype(float))))
        if not complete.empty:
            ax.axhline(complete.iloc[0]["mean"], linestyle="--", color="0.3", label=FL_LABEL)
        ax.set_xlabel("average connectivity |A| (self included)")
        ax.set_ylabel(f"{protocol} top-1 accuracy (%)")
        ax.set_title(f"DecL on {selection['dataset']} ({selection['model']}, {selection['partition']})\n"
                     f"{FIG2A_PAPER_CLAIM}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out_png = Path(out_png)
        fig.savefig(out_png, format="png", dpi=120, metadata={"Software": None})
        plt.close(fig)
    return out_png


def sweep_figure(points: pd.DataFrame, out_png: Path | str, x_label: str, y_label: str, title: str) -> Path:
    """One line of mean accuracy (%) with 95 % seed-interval bars against a swept value (``x``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    line = points.sort_values("x")
    with sns.axes_style("whitegrid"):
        fig, ax = plt.subplots(figsize=(5.0, 3.6), dpi=120)
        ax.errorbar(line["x"], line["mean"], yerr=line["ci"].fillna(0.0), marker="o", capsize=3)
        ax.set_xticks(list(line["x"]))
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        out_png = Path(out_png)
        fig.savefig(out_png, format="png", dpi=120, metadata={"Software": None})
        plt.close(fig)
    return out_png

"""Figures of the numerical theory study (paper A, Theorems 4.4 / 4.6, Corollary 4.5).

Each function takes a DataFrame (from dssl.theory.sweep or dssl.theory.improvement_study) and an output
path and writes one figure with the Agg backend. Output is deterministic for the same data and library
versions: fixed style, fixed orderings, no timestamps in the file metadata.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

METHOD_ORDER = ["cl", "cl_h", "mim"]
METHOD_LABELS = {"cl": "CL (similar)", "cl_h": "CL (dissimilar H)", "mim": "MIM"}
FRAMEWORK_ORDER = ["local", "decl", "decl_nbhd", "fl"]
FRAMEWORK_LABELS = {
    "local": "local (mean over clients)",
    "decl": "DecL, Eq. (1) (mean over graphs)",
    "decl_nbhd": "DecL neighbourhood models (mean over graphs)",
    "fl": "FL",
}
CRITERION_ORDER = ["sensitivity", "algebraic_connectivity", "min_degree", "random"]
VALUE_LABELS = {
    "sensitivity": "sensitivity s (k <= c)",
    "sensitivity_N": "sensitivity s (k <= N)",
    "heldout_sensitivity": "sensitivity s (k <= c), independent draw",
    "heldout_sensitivity_N": "sensitivity s (k <= N), independent draw",
}


_STABLE_METADATA = {".png": {"Software": None}, ".pdf": {"CreationDate": None}, ".svg": {"Date": None}}


def _style() -> None:
    sns.set_theme(style="whitegrid", context="paper")
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "svg.hashsalt": "dssl-theory"})


def _save(fig: plt.Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Drop the fields that vary between runs (timestamps, version strings) from the file metadata.
    metadata = _STABLE_METADATA.get(path.suffix.lower())
    fig.savefig(path, bbox_inches="tight", metadata=metadata)
    plt.close(fig)
    return path


def _legend_outside(ax: plt.Axes) -> None:
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)


def _ordered(values, order: list[str]) -> list[str]:
    present = list(dict.fromkeys(values))
    return [v for v in order if v in present] + sorted(v for v in present if v not in order)


def plot_sensitivity_vs_d(df: pd.DataFrame, path: str | Path, *, value: str = "sensitivity") -> Path:
    """s against d (log x) per method, one panel per framework; mean over seeds with min-max band.

    DecL panels average over the graphs of the sweep first (s against |A| is the next figure).
    """
    _style()
    frameworks = _ordered(df["framework"], FRAMEWORK_ORDER)
    methods = _ordered(df["method"], METHOD_ORDER)
    per_seed = df.groupby(["framework", "method", "d", "seed"], sort=True)[value].mean().reset_index()
    fig, axes = plt.subplots(1, len(frameworks), figsize=(4.2 * len(frameworks), 3.4), sharey=True, squeeze=False)
    colors = dict(zip(methods, sns.color_palette("colorblind", len(methods))))
    for ax, framework in zip(axes[0], frameworks):
        for method in methods:
            sub = per_seed[(per_seed["framework"] == framework) & (per_seed["method"] == method)]
            if sub.empty:
                continue
            stats = sub.groupby("d")[value].agg(["mean", "min", "max"])
            label = METHOD_LABELS.get(method, method)
            ax.plot(stats.index, stats["mean"], marker="o", color=colors[method], label=label)
            ax.fill_between(stats.index, stats["min"], stats["max"], color=colors[method], alpha=0.2, linewidth=0)
        ax.set_xscale("log", base=2)
        ax.set_title(FRAMEWORK_LABELS.get(framework, framework), fontsize=9)
        ax.set_xlabel("d")
    axes[0, 0].set_ylabel(VALUE_LABELS.get(value, value))
    _legend_outside(axes[0, -1])
    fig.suptitle("Theorem 4.4: sensitivity against d (mean over seeds, band = min..max)", fontsize=10)
    return _save(fig, path)


def plot_sensitivity_vs_connectivity(
    df: pd.DataFrame, path: str | Path, *, d: int | None = None, value: str = "sensitivity", framework: str = "decl"
) -> Path:
    """s against mean |A_i| per topology (DecL), FL as a horizontal line; one panel per method.

    ``d`` defaults to the largest d of the sweep. Points are means over seeds, bars the standard
    deviation over seeds.
    """
    _style()
    d = int(df["d"].max()) if d is None else int(d)
    at_d = df[df["d"] == d]
    methods = _ordered(at_d["method"], METHOD_ORDER)
    dec = at_d[at_d["framework"] == framework]
    topologies = _ordered(dec["topology"], ["uniform", "general", "complete"])
    colors = dict(zip(topologies, sns.color_palette("colorblind", len(topologies))))
    fig, axes = plt.subplots(1, len(methods), figsize=(4.0 * len(methods), 3.4), squeeze=False)
    for ax, method in zip(axes[0], methods):
        for i, topology in enumerate(topologies):
            sub = dec[(dec["method"] == method) & (dec["topology"] == topology)]
            stats = sub.groupby("connectivity")[value].agg(["mean", "std"]).fillna(0.0)
            offset = (i - (len(topologies) - 1) / 2) * 0.12  # keep coincident points visible
            ax.errorbar(stats.index + offset, stats["mean"], yerr=stats["std"], marker="o", capsize=3,
                        color=colors[topology], label=f"DecL {topology}")
        fl = at_d[(at_d["framework"] == "fl") & (at_d["method"] == method)][value]
        if not fl.empty:
            ax.axhline(float(fl.mean()), color="black", linestyle="--", linewidth=1, label="FL")
        ax.set_title(METHOD_LABELS.get(method, method), fontsize=9)
        ax.set_xlabel("mean |A_i| (self included)")
    axes[0, 0].set_ylabel(VALUE_LABELS.get(value, value))
    _legend_outside(axes[0, -1])
    fig.suptitle(f"Corollary 4.5 / Theorem 4.6: sensitivity against connectivity (d = {d})", fontsize=10)
    return _save(fig, path)


def plot_improvement(df: pd.DataFrame, path: str | Path, *, value: str | None = None) -> Path:
    """DecL sensitivity after each added edge, per greedy criterion vs random; mean over seeds.

    One panel per start graph; shaded band = min..max over seeds. ``value`` defaults to
    ``heldout_sensitivity`` when present (the greedy "sensitivity" criterion is fitted to its own
    data draw, so the independent draw is the fair comparison), else ``sensitivity``.
    """
    _style()
    if value is None:
        value = "heldout_sensitivity" if "heldout_sensitivity" in df.columns else "sensitivity"
    graphs = sorted(df["graph"].unique(), key=str)
    criteria = _ordered(df["criterion"], CRITERION_ORDER)
    colors = dict(zip(criteria, sns.color_palette("colorblind", len(criteria))))
    fig, axes = plt.subplots(1, len(graphs), figsize=(4.0 * len(graphs), 3.4), squeeze=False, sharey=True)
    for ax, graph in zip(axes[0], graphs):
        for criterion in criteria:
            sub = df[(df["graph"] == graph) & (df["criterion"] == criterion)]
            stats = sub.groupby("step")[value].agg(["mean", "min", "max"])
            style = "--" if criterion == "random" else "-"
            ax.plot(stats.index, stats["mean"], style, marker="o", color=colors[criterion], label=criterion)
            ax.fill_between(
                stats.index, stats["min"], stats["max"], color=colors[criterion], alpha=0.15, linewidth=0
            )
        ax.set_title(str(graph), fontsize=9)
        ax.set_xlabel("edges added")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes[0, 0].set_ylabel("DecL " + VALUE_LABELS.get(value, value))
    _legend_outside(axes[0, -1])
    meta = df[["method", "d"]].drop_duplicates()
    label = ", ".join(f"{m} at d={int(dd)}" for m, dd in meta.itertuples(index=False))
    fig.suptitle(f"Greedy edge addition ({label}; mean over seeds)", fontsize=10)
    return _save(fig, path)


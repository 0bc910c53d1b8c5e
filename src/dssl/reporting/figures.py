"""The report's figures (seaborn on matplotlib's Agg backend), one function per kind of figure.

Every figure carries a footer naming the build's profile, how its cells were scored (protocol and
downstream dataset) and the seeds behind each mean (``footer``), so a figure read on its own -- in
``dvc plots show``, in the HTML report -- still says what it shows. Intervals are the report's: 95 %
Student-t intervals over seeds for means, of the paired per-seed difference for claims.

- ``forest``: paired differences with their intervals, one row each, coloured by verdict (the claims
  overview and the pretraining gain over random init);
- ``grouped_bars``: paper A's Table 1 (rows x settings);
- ``figure2a``: paper A's Fig. 2a (DecL accuracy against |A|, the FL line);
- ``alpha_lines``: paper A's Fig. 2b (MAE and MAR against the label skew alpha);
- ``dot_plot``: a comparison table (paper A's Tables 6 and 8, ...), rows against accuracy per column;
- ``sweep_figure``: one swept value (paper B's lambda);
- ``feature_grid``: paper A's Fig. 3 (2-D embeddings of test features, coloured by class).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from dssl.reporting.results import summarise

FIG2A_PAPER_CLAIM = "paper: accuracy rises with |A|; FL never below DecL"
FL_LABEL = "FL (complete graph)"
TOPOLOGIES = ("uniform", "general")
VERDICT_ORDER = ("supported", "contradicted", "inconclusive", "untestable")
DPI = 110


def footer(profile: str, seeds: Sequence[int], scored: str | None = None) -> str:
    """"profile embedded · linear_probe_10pct on digits · seeds 0, 1, 2": what a figure's numbers are."""
    label = "seed" if len(seeds) == 1 else "seeds"
    parts = [f"profile {profile}", scored, f"{label} {', '.join(str(s) for s in seeds)}" if seeds else None]
    return " · ".join(p for p in parts if p)


def wrap(text: str, width_in: float, fontsize: float = 9.5) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``fontsize`` points (existing breaks kept)."""
    import textwrap

    chars = max(20, int(width_in * 72 / (0.55 * fontsize)))
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def verdict_colours() -> dict[str, tuple]:
    """One colour per verdict from seaborn's colour-blind palette (untestable in grey)."""
    import seaborn as sns

    palette = sns.color_palette("colorblind")
    return dict(zip(VERDICT_ORDER, (palette[2], palette[3], palette[1], (0.6, 0.6, 0.6))))


@contextmanager
def figure(path: Path | str, size: tuple[float, float], note: str, legend_rows: float = 0.0, right: float = 1.0,
           **subplots) -> Iterator[tuple]:
    """A seaborn-styled figure saved to ``path`` as PNG with ``note`` as its footer and as the file's
    ``Description`` (no timestamp in the file, so the same data draw the same bytes); ``legend_rows``
    lines of a figure legend fit above the footer; the axes keep left of ``right`` (a fraction of the
    width), leaving the rest to text drawn outside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.8):
        fig, axes = plt.subplots(figsize=size, dpi=DPI, **subplots)
        try:
            yield fig, axes
            footer_in = 0.18 + 0.22 * legend_rows
            fig.tight_layout(rect=(0, footer_in / size[1], right, 1))
            fig.text(0.01, 0.005, note, fontsize=7, color="0.35", ha="left", va="bottom")
            fig.savefig(Path(path), format="png", dpi=DPI, metadata={"Software": None, "Description": note})
        finally:
            plt.close(fig)


# -- forest plots --------------------------------------------------------------------------------------

FOREST_COLUMNS = ["group", "label", "verdict", "difference", "low", "high", "reason", "unit"]


def forest(rows: pd.DataFrame, path: Path | str, title: str, x_label: str, note: str) -> Path:
    """A forest plot: per row (``FOREST_COLUMNS``) the difference with its interval, coloured by verdict,
    rows grouped under their ``group`` heading, and right of the plot a column of text: the difference with
    its interval and verdict, or for a row without one (untestable) its ``reason`` (the row is marked at 0).
    A line at 0 separates the two sides; rows of another ``unit`` than the first get a panel of their own
    (``x_label`` names the unit: "{unit}")."""
    units = list(dict.fromkeys(rows["unit"]))
    layouts = [_forest_layout(rows[rows["unit"] == unit]) for unit in units]
    colours = verdict_colours()
    sizes = [len(layout) for layout in layouts]
    height = 1.3 + 0.2 * sum(sizes) + 0.55 * len(units)
    with figure(path, (11.0, height), note, right=TEXT_COLUMN, nrows=len(units), squeeze=False,
                gridspec_kw={"height_ratios": sizes}) as (fig, axes):
        for ax, layout, unit in zip(axes[:, 0], layouts, units):
            _forest_panel(ax, layout, colours)
            ax.set_xlabel(wrap(x_label.format(unit=unit), 4.5, 8), fontsize=8)
        top = axes[0][0]
        top.set_title(wrap(title, 6.0), fontsize=9.5, loc="left", pad=22)
        counts = rows["verdict"].value_counts()
        handles = [_legend_dot(colours[v], f"{v} ({int(counts.get(v, 0))})") for v in VERDICT_ORDER if v in counts]
        top.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=len(handles), fontsize=7,
                   frameon=False, borderaxespad=0.1)
    return Path(path)


def _forest_panel(ax, layout: list[dict], colours: dict) -> None:
    ys = np.arange(len(layout))[::-1]
    beside = ("axes fraction", "data")   # the text column: right of the plot, on the row's line
    for y, item in zip(ys, layout):
        if item["kind"] == "group":   # a heading over the plot and the text column
            heading = ax.text(0.0, y, _cut(item["text"], HEADING_CHARS), transform=ax.get_yaxis_transform(),
                              ha="left", va="center", fontsize=7.5, fontweight="bold", clip_on=False)
            heading.set_in_layout(False)
            continue
        row = item["row"]
        colour = colours.get(row["verdict"], (0.2, 0.2, 0.2))
        if _finite(row["difference"]):
            interval = _finite(row["low"]) and _finite(row["high"])
            if interval:
                ax.hlines(y, row["low"], row["high"], color=colour, linewidth=2.0)
            ax.plot(row["difference"], y, "o", color=colour, markersize=4.5)
            text = (f"{row['difference']:+.2f} [{row['low']:+.2f}, {row['high']:+.2f}]" if interval
                    else f"{row['difference']:+.2f} (one seed)") + f"  {row['verdict']}"
            style = {"color": colour, "fontsize": 6.8}
        else:
            ax.plot(0.0, y, "x", color=colour, markersize=5)
            text, style = _cut(str(row["reason"]), REASON_CHARS), {"color": "0.35", "fontsize": 6.5, "style": "italic"}
        note = ax.annotate(text, (1.0, y), xycoords=beside, xytext=(8, 0), textcoords="offset points", va="center",
                           annotation_clip=False, **style)
        note.set_in_layout(False)
    from matplotlib.ticker import MaxNLocator

    ax.axvline(0.0, color="0.25", linewidth=0.8)
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.set_xlim(*_span([row[k] for item in layout if item["kind"] == "row" for row in [item["row"]]
                        for k in ("difference", "low", "high")]))
    ax.set_yticks(ys)
    ax.set_yticklabels(["" if item["kind"] == "group" else _cut(str(item["row"]["label"]), LABEL_CHARS)
                        for item in layout], fontsize=7)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="y", visible=False)
    ax.set_ylim(-0.8, len(layout) - 0.2)


TEXT_COLUMN = 0.62   # the plot's right edge (fraction of the width); the text column fills the rest
REASON_CHARS = 80    # an untestable row's reason, cut to fit the text column
LABEL_CHARS = 58     # a row's label
HEADING_CHARS = 150  # a group's heading


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "…"


def _span(values: list) -> tuple[float, float]:
    """The x range of a forest panel: every finite value and 0, with a margin."""
    finite = [float(v) for v in values if _finite(v)] + [0.0]
    low, high = min(finite), max(finite)
    if high - low == 0:
        return -1.0, 1.0
    margin = 0.08 * (high - low)
    return low - margin, high + margin


def _forest_layout(rows: pd.DataFrame) -> list[dict]:
    layout: list[dict] = []
    for group, members in rows.groupby("group", sort=False):
        layout.append({"kind": "group", "text": str(group)})
        layout += [{"kind": "row", "row": row} for _, row in members.iterrows()]
    return layout


def _legend_dot(colour, label: str):
    from matplotlib.lines import Line2D

    return Line2D([0], [0], marker="o", color=colour, linestyle="-", markersize=5, label=label)


def _finite(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


# -- paper figures and tables ----------------------------------------------------------------------------

def grouped_bars(cells: pd.DataFrame, path: Path | str, groups: Sequence[str], title: str, y_label: str,
                 note: str) -> Path:
    """Bars of ``mean`` with ``ci`` error bars: one cluster per ``row`` (in order), one bar per ``hue`` in
    ``groups`` order, one panel per ``panel``."""
    import seaborn as sns

    panels = list(dict.fromkeys(cells["panel"]))
    colours = dict(zip(groups, sns.color_palette("colorblind", len(groups))))
    with figure(path, (4.8 * len(panels) + 1.5, 4.2), note, ncols=len(panels), squeeze=False) as (fig, axes):
        for ax, panel in zip(axes[0], panels):
            data = cells[cells["panel"] == panel]
            rows = list(dict.fromkeys(data["row"]))
            width = 0.8 / len(groups)
            for i, group in enumerate(groups):
                part = data[data["hue"] == group].set_index("row")
                xs = [r + (i - (len(groups) - 1) / 2) * width for r, row in enumerate(rows) if row in part.index]
                present = [row for row in rows if row in part.index]
                if not present:
                    continue
                ax.bar(xs, part.loc[present, "mean"], width=width, color=colours[group], label=group,
                       yerr=part.loc[present, "ci"].fillna(0.0), capsize=2, error_kw={"linewidth": 0.8})
            ax.set_xticks(range(len(rows)))
            ax.set_xticklabels(rows, rotation=30, ha="right", fontsize=7)
            ax.set_ylabel(y_label)
            ax.set_title(str(panel), fontsize=9)
            low = np.nanmin(data["mean"] - data["ci"].fillna(0.0))
            ax.set_ylim(max(0.0, low - 10.0), min(100.0, np.nanmax(data["mean"] + data["ci"].fillna(0.0)) + 5.0))
        axes[0][0].legend(fontsize=7, loc="lower left")
        fig.suptitle(wrap(title, 4.8 * len(panels) + 1.3, 10), fontsize=10, x=0.01, ha="left")
    return Path(path)


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
             partition: str | None = None, protocol: str = "finetune", strategy: str | None = None,
             note: str = "") -> Path:
    """Draw Fig. 2a: DecL accuracy vs |A| per topology (mean, 95 % seed-interval bars), the FL line."""
    import seaborn as sns

    runs, selection = fig2a_runs(df, dataset, model, partition, protocol, strategy)
    points = summarise(runs[runs["topology"].isin(TOPOLOGIES)], ["topology", "connectivity"])
    complete = summarise(runs[runs["topology"] == "complete"], ["topology"])
    palette = sns.color_palette("colorblind")
    with figure(out_png, (5.8, 4.2), note) as (fig, ax):
        for (topology, marker), colour in zip(zip(TOPOLOGIES, "os"), palette):
            line = points[points["topology"] == topology].sort_values("connectivity")
            if not line.empty:
                ax.errorbar(line["connectivity"], line["mean"], yerr=line["ci"].fillna(0.0), marker=marker,
                            capsize=3, label=topology, color=colour)
        if not points.empty:
            ax.set_xticks(sorted(set(points["connectivity"].astype(float))))
        if not complete.empty:
            fl = complete.iloc[0]
            ax.axhline(fl["mean"], linestyle="--", color="0.3", label=FL_LABEL)
            if _finite(fl["ci"]):
                ax.axhspan(fl["mean"] - fl["ci"], fl["mean"] + fl["ci"], color="0.3", alpha=0.1)
        ax.set_xlabel("average connectivity |A| (self included)")
        ax.set_ylabel(f"{protocol} top-1 accuracy (%)")
        ax.set_title(wrap(f"Fig. 2a: DecL {selection['model']} on {selection['partition']} "
                          f"({strategy or 'any strategy'})\n{FIG2A_PAPER_CLAIM}", 5.6, 9), fontsize=9)
        ax.legend(fontsize=8)
    return Path(out_png)


def alpha_lines(points: pd.DataFrame, out_png: Path | str, title: str, y_label: str, note: str) -> Path:
    """Paper A's Fig. 2b: accuracy (``mean`` +- ``ci``) against the label skew ``alpha`` (log scale, the
    most skewed on the right, IID drawn at paper A's alpha = 1e5), one line per ``row`` (MAE, MAR)."""
    import seaborn as sns

    rows = list(dict.fromkeys(points["row"]))
    colours = dict(zip(rows, sns.color_palette("colorblind", len(rows))))
    with figure(out_png, (5.8, 4.2), note) as (fig, ax):
        for i, (row, marker) in enumerate(zip(rows, "osD^v")):
            line = points[points["row"] == row].sort_values("alpha", ascending=False)
            dodge = 10 ** ((i - (len(rows) - 1) / 2) * 0.04)   # side by side, so both intervals show
            ax.errorbar(line["alpha"] * dodge, line["mean"], yerr=line["ci"].fillna(0.0), marker=marker, capsize=3,
                        label=row, color=colours[row])
        ax.set_xscale("log")
        ticks = sorted(set(points["alpha"]), reverse=True)
        ax.set_xticks(ticks)
        ax.set_xticklabels([_alpha_label(a) for a in ticks])
        ax.set_xlim(max(ticks) * 3, min(ticks) / 3)    # decreasing alpha: more skew to the right
        ax.set_xlabel("Dirichlet alpha (label skew grows to the right)")
        ax.set_ylabel(y_label)
        ax.set_title(wrap(title, 5.6, 9), fontsize=9)
        ax.legend(fontsize=8)
    return Path(out_png)


IID_ALPHA = 1e5   # paper A draws IID as alpha = 1e5


def _alpha_label(alpha: float) -> str:
    return "IID (1e5)" if alpha >= IID_ALPHA else f"{alpha:g}"


def dot_plot(cells: pd.DataFrame, out_png: Path | str, best: str, title: str, x_label: str, note: str) -> Path:
    """A comparison table as dots: per ``column`` a panel, per ``row`` its ``mean`` with the ``ci`` bar;
    the paper's best row in its own colour."""
    import seaborn as sns

    columns = list(dict.fromkeys(cells["column"]))
    rows = list(dict.fromkeys(cells["row"]))
    palette = sns.color_palette("colorblind")
    height = 2.0 + 0.32 * len(rows)
    with figure(out_png, (4.2 * len(columns) + 2.2, height), note, ncols=len(columns), squeeze=False,
                sharey=True) as (fig, axes):
        ys = {row: len(rows) - 1 - i for i, row in enumerate(rows)}
        for ax, column in zip(axes[0], columns):
            for r in cells[cells["column"] == column].itertuples():
                colour = palette[0] if r.row == best else palette[7]
                ax.errorbar(r.mean, ys[r.row], xerr=0.0 if math.isnan(r.ci) else r.ci, fmt="o", color=colour,
                            capsize=3)
            ax.set_title(str(column), fontsize=9)
            ax.set_xlabel(x_label)
        axes[0][0].set_yticks(list(ys.values()))
        axes[0][0].set_yticklabels([f"{row} *" if row == best else row for row in ys], fontsize=8)
        axes[0][0].set_ylim(-0.6, len(rows) - 0.4)
        fig.suptitle(wrap(title, 4.2 * len(columns) + 2.0, 10), fontsize=10, x=0.01, ha="left")
    return Path(out_png)


def sweep_figure(points: pd.DataFrame, out_png: Path | str, x_label: str, y_label: str, title: str,
                 note: str = "") -> Path:
    """One line of mean accuracy (%) with 95 % seed-interval bars against a swept value (``x``)."""
    line = points.sort_values("x")
    with figure(out_png, (5.4, 3.9), note) as (fig, ax):
        ax.errorbar(line["x"], line["mean"], yerr=line["ci"].fillna(0.0), marker="o", capsize=3)
        ax.set_xticks(list(line["x"]))
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.set_title(wrap(title, 5.2, 9), fontsize=9)
    return Path(out_png)


def curve_panels(points: pd.DataFrame, out_png: Path | str, x_label: str, y_label: str, title: str,
                 note: str) -> Path:
    """One panel per ``panel`` (a protocol), one line per ``line`` (a model): ``mean`` +- ``ci`` against
    ``x``, with the line's ``reference`` (its random-init backbone) as a dashed line in its colour."""
    import seaborn as sns

    panels, lines = list(dict.fromkeys(points["panel"])), list(dict.fromkeys(points["line"]))
    colours = dict(zip(lines, sns.color_palette("colorblind", len(lines))))
    with figure(out_png, (4.2 * len(panels) + 0.6, 4.0), note, legend_rows=1.2, ncols=len(panels),
                squeeze=False) as (fig, axes):
        for ax, panel in zip(axes[0], panels):
            for line, marker in zip(lines, "osD^v<>"):
                curve = points[(points["panel"] == panel) & (points["line"] == line)].sort_values("x")
                if curve.empty:
                    continue
                ax.errorbar(curve["x"], curve["mean"], yerr=curve["ci"].fillna(0.0), marker=marker, capsize=3,
                            color=colours[line], label=line)
                if curve["reference"].notna().any():
                    ax.axhline(curve["reference"].dropna().iloc[0], color=colours[line], linestyle="--",
                               linewidth=1)
            ax.set_xticks(sorted(set(points["x"])))
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label)
            ax.set_title(panel, fontsize=9)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(lines), fontsize=8, bbox_to_anchor=(0.5, 0.04))
        fig.suptitle(wrap(title, 4.2 * len(panels), 9), fontsize=9)
    return Path(out_png)


def feature_grid(embeddings: pd.DataFrame, out_png: Path | str, title: str, note: str) -> Path:
    """Paper A's Fig. 3: one panel per (``model`` row, ``column``) of 2-D points (``x``, ``y``) coloured by
    ``label`` (the class)."""
    import seaborn as sns

    rows = list(dict.fromkeys(embeddings["model"]))
    columns = list(dict.fromkeys(embeddings["column"]))
    classes = sorted(set(embeddings["label"]))
    colours = dict(zip(classes, sns.color_palette("tab10" if len(classes) <= 10 else "husl", len(classes))))
    with figure(out_png, (2.6 * len(columns) + 0.8, 2.5 * len(rows) + 1.1), note, legend_rows=1.5, nrows=len(rows),
                ncols=len(columns), squeeze=False) as (fig, axes):
        for i, row in enumerate(rows):
            for j, column in enumerate(columns):
                ax = axes[i][j]
                part = embeddings[(embeddings["model"] == row) & (embeddings["column"] == column)]
                ax.scatter(part["x"], part["y"], c=[colours[c] for c in part["label"]], s=4, linewidths=0)
                ax.set_xticks([])
                ax.set_yticks([])
                if i == 0:
                    ax.set_title(str(column), fontsize=8.5)
                if j == 0:
                    ax.set_ylabel(str(row), fontsize=9)
        handles = [_legend_dot(colours[c], str(c)) for c in classes]
        fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.03), fontsize=7,
                   ncol=min(len(classes), 10), frameon=False, title="class", title_fontsize=7)
        fig.suptitle(wrap(title, 2.6 * len(columns) + 0.6, 10), fontsize=10, x=0.01, ha="left")
    return Path(out_png)

"""Paper A's Theorem 4.4, Corollary 4.5 and Theorem 4.6 checked on the theory sweep, at every d.

:func:`claim_checks` reads the rows of ``dssl.theory.sweep.run_theory_sweep`` (means over seeds) and
says, per claim and d, whether it holds and by what margin: Theorem 4.4 (contrastive learning's
sensitivity above MIM's), Corollary 4.5 (DecL's sensitivity falls as the mean |A_i| grows) and
Theorem 4.6 (DecL's sensitivity at least FL's). Ties of exactly equal objectives (a regular graph's DecL
objective is FL's, docs/theory.md) are absorbed by ``atol``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dssl.theory.options import EXTRA_FRAMEWORKS
from dssl.theory.sweep import GROUP_COLUMNS


def _first_d_holding(holds: dict[int, bool]) -> int | None:
    """Smallest d such that the claim holds at d and at every larger d (None if it fails at the top)."""
    first = None
    for d in sorted(holds, reverse=True):
        if not holds[d]:
            break
        first = d
    return first


def _claim(claim: str, sub_id: str, statement: str, holds: dict[int, bool], margin: dict[int, float]) -> dict:
    return {
        "claim": claim,
        "claim_id": f"{claim}[{sub_id}]",
        "value": "",
        "statement": statement,
        "holds_by_d": {int(d): bool(v) for d, v in holds.items()},
        "margin_by_d": {int(d): float(v) for d, v in margin.items()},
        "holds_from_d": _first_d_holding(holds),
        "holds_at_largest_d": bool(holds[max(holds)]) if holds else False,
    }


def _thm44(means: pd.DataFrame, atol: float) -> list[dict]:
    out = []
    for framework in sorted(means["framework"].unique()):
        sub = means[means["framework"] == framework]
        for cl in ("cl", "cl_h"):
            if not {cl, "mim"} <= set(sub["method"]):
                continue
            piv = sub.pivot_table(index=["d", "graph"], columns="method", values="value")
            diff = (piv[cl] - piv["mim"]).groupby(level="d").min()  # must hold on every graph
            holds = {d: v > atol for d, v in diff.items()}
            out.append(_claim(
                "thm4.4", f"{framework},{cl}>mim",
                f"{framework}: s_{cl} > s_mim (every graph), mean over seeds",
                holds, diff.to_dict(),
            ))
    return out


def _cor45(means: pd.DataFrame, atol: float) -> list[dict]:
    out = []
    dec = means[means["framework"].isin(("decl",) + EXTRA_FRAMEWORKS)]
    for (framework, method, topology), sub in dec.groupby(["framework", "method", "topology"], sort=True):
        if topology == "complete" or sub["connectivity"].nunique() < 2:
            continue
        holds, margin = {}, {}
        for d, at_d in sub.groupby("d"):
            curve = at_d.groupby("connectivity")["value"].mean().sort_index()
            steps = np.diff(curve.to_numpy())  # must all be < 0: s strictly falls as |A| grows
            holds[d] = bool(np.all(steps < -atol))
            margin[d] = float(-np.max(steps))
        out.append(_claim(
            "cor4.5", f"{framework},{method},{topology}",
            f"{framework} {topology}: s_{method} strictly decreases with mean |A_i|, mean over seeds",
            holds, margin,
        ))
    return out


def _thm46(means: pd.DataFrame, atol: float) -> list[dict]:
    out = []
    fl = means[means["framework"] == "fl"].set_index(["d", "method"])["value"]
    dec = means[means["framework"].isin(("decl",) + EXTRA_FRAMEWORKS)]
    for (framework, method, topology), sub in dec.groupby(["framework", "method", "topology"], sort=True):
        holds, margin = {}, {}
        for d, at_d in sub.groupby("d"):
            if (d, method) not in fl.index:
                continue
            gap = float(at_d["value"].min() - fl[(d, method)])
            holds[d] = gap >= -atol
            margin[d] = gap
        if holds:
            out.append(_claim(
                "thm4.6", f"{framework},{method},{topology}",
                f"{framework} {topology}: s_Dec >= s_Fed for {method} on every graph, mean over seeds",
                holds, margin,
            ))
    return out


def claim_checks(
    df: pd.DataFrame, values: tuple[str, ...] = ("sensitivity", "sensitivity_N"), atol: float = 1e-9
) -> list[dict]:
    """Theorem 4.4, Corollary 4.5 and Theorem 4.6 evaluated on the sweep, per d (means over seeds).

    Checked for each column in ``values`` (default: the paper's window k <= c, then k <= N; columns
    missing from ``df`` are skipped). Each dict: claim, claim_id (suffix "@k<=N" for the N window),
    value (the column), statement, holds_by_d {d: bool}, margin_by_d {d: float} (positive = holds with
    that margin), holds_from_d (smallest d from which it holds at every larger d, or None),
    holds_at_largest_d. ``atol`` absorbs floating-point ties (a regular graph's DecL objective equals
    FL's exactly, see docs/theory.md).
    """
    out: list[dict] = []
    for value in values:
        if value not in df.columns:
            continue
        means = df.groupby(GROUP_COLUMNS, sort=True)[value].mean().reset_index().rename(columns={value: "value"})
        for check in _thm44(means, atol) + _cor45(means, atol) + _thm46(means, atol):
            check["value"] = value
            if value != "sensitivity":
                check["claim_id"] += "@k<=N" if value == "sensitivity_N" else f"@{value}"
                check["statement"] += f" [{value}]"
            out.append(check)
    return out

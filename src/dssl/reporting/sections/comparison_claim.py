"""A comparison table's claim in one column: "the claimed row is above every other row".

Checked on paired per-seed differences between the claimed row and each other row: supported when it beats
every other row beyond its interval, contradicted when some row beats it beyond its interval, otherwise
inconclusive. The gate reads the one arm the claim needs, the claimed row: where its pretraining does not beat
random init the claim is untestable. The other rows run the same schedule and may fall below random init (an
ablated model collapsing, a baseline learning less): that is an outcome the claim predicts, not a reason to
call it untestable.

A row may run more seeds than the rows it is compared with (a grid that sets its own where a gate needs them:
paper B's FedBYOL): the gate reads every seed of the claimed row, each comparison pairs the seeds both rows
ran, and the finding names them.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from dssl.reporting.claims import UNTESTABLE, Finding, PretrainingGate, compare
from dssl.reporting.stats import CONTRADICTED, INCONCLUSIVE, SUPPORTED
from dssl.reporting.tables import compared_cells


def claimed_row_finding(section: str, claim: str, subject: str, claimed: str, best: pd.DataFrame,
                        others: Mapping[str, pd.DataFrame], gate: PretrainingGate) -> Finding:
    """The claim in one column: ``claimed`` (its cell ``best``) against every row of ``others`` (label -> cell),
    gated on the claimed row; the difference reported is the one to the closest row."""
    named = compared_cells(best, *others.values())
    arms = {claimed: best}
    blocked = gate.untestable(arms)
    if blocked:
        return Finding(section, claim, subject, UNTESTABLE, None, blocked, cells=named, gated=tuple(arms))
    compared = [(row, *compare(*on_shared_seeds(best, cell), +1)) for row, cell in others.items()]
    row, diff, _ = min(compared, key=lambda c: c[1].mean)
    detail = f"{claimed} - {row} (the closest row{shared_seeds_note({claimed: best, row: others[row]})})"
    return Finding(section, claim, subject, above_every_row([outcome for _, _, outcome in compared]), diff,
                   detail, cells=named, gated=tuple(arms))


def on_shared_seeds(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two rows' runs on the seeds both ran: a comparison pairs seed by seed (``shared_seeds_note`` names what
    it left out). Raises ValueError when they share no seed."""
    shared = set(a["seed"].astype(int)) & set(b["seed"].astype(int))
    if not shared:
        raise ValueError(f"the rows share no seed ({sorted(set(a['seed']))} and {sorted(set(b['seed']))}): "
                         "give their grids common seeds")
    return a[a["seed"].astype(int).isin(shared)], b[b["seed"].astype(int).isin(shared)]


def shared_seeds_note(rows: Mapping[str, pd.DataFrame]) -> str:
    """"; paired on seeds 0, 1, 2, 3, which both ran: FedBYOL ran 8" when the compared rows (label -> runs) ran
    different seeds; empty when they ran the same."""
    ran = {label: set(cell["seed"].astype(int)) for label, cell in rows.items()}
    shared = set.intersection(*ran.values())
    more = [f"{label} ran {len(seeds)}" for label, seeds in ran.items() if seeds != shared]
    if not more:
        return ""
    return f"; paired on seeds {', '.join(map(str, sorted(shared)))}, which both ran: {', '.join(more)}"


def above_every_row(outcomes: list[str]) -> str:
    """The verdict on "above every other row" from the verdicts against each row: one contradiction
    contradicts it, it is supported only when every comparison is."""
    return (CONTRADICTED if CONTRADICTED in outcomes
            else SUPPORTED if all(o == SUPPORTED for o in outcomes) else INCONCLUSIVE)

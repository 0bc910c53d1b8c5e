"""Claim checks: paired per-seed comparisons of measured cells, their verdicts, and the gate on them.

A claim "a beats b" is judged on the per-seed differences a[s] - b[s] (``stats.paired_difference``):
the compared conditions share each seed's initial weights and client schedule, so pairing removes what
they have in common. Verdicts are ``stats.VERDICTS`` plus ``UNTESTABLE``: a claim about pretraining
(robustness to non-IID data, the effect of connectivity) is only evidence when the pretraining behind
each compared cell beats the same backbone from random init (``PretrainingGate``); otherwise the claim
is "untestable at this scale". Each claim declares which of its arms the gate reads (``Finding.gated``):
the arms it needs to say something about pretraining, i.e. the one it says is higher (a difference of
differences or a distance needs all of them); an arm the paper expects to be lower, or to collapse, may fall
below random init and the claim is still tested.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dssl.reporting.results import accuracy_by_seed
from dssl.reporting.stats import CONTRADICTED, INCONCLUSIVE, SUPPORTED, Interval, paired_difference, verdict

UNTESTABLE = "untestable"
UNTESTABLE_PREFIX = "untestable at this scale: "
ALL_VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, UNTESTABLE)
RANDOM = "random"   # the evaluate framework of randomly initialised backbones


@dataclass(frozen=True)
class Finding:
    """One checked claim: what the paper claims, about which cells, the verdict and its evidence.

    ``difference`` is the paired per-seed difference the verdict rests on, in the direction ``detail``
    names; None for untestable claims, whose ``detail`` says why. ``unit``: "pp" for accuracies (the
    difference is a fraction, printed x 100), any other unit is printed as measured (Table 5's distances).
    ``cells``: the complete names of the compared cells (``tables.compared_cells``); ``expected_sign``:
    the sign of ``difference`` the paper predicts (+1 unless ``detail``'s direction is the opposite).
    ``gated``: the labels of the arms that had to beat random init for the claim to be tested.
    """

    section: str
    claim: str
    subject: str
    verdict: str
    difference: Interval | None
    detail: str
    unit: str = "pp"
    cells: str = ""
    expected_sign: int = +1
    gated: tuple[str, ...] = ()

    @property
    def scale(self) -> float:
        return 100.0 if self.unit == "pp" else 1.0

    def evidence(self) -> str:
        """The difference with its 95 % interval, e.g. "-1.70 [-3.10, -0.30] pp"."""
        if self.difference is None:
            return self.detail
        d, k = self.difference, self.scale
        if not d.defined:
            return f"{self.detail}: {k * d.mean:+.2f} {self.unit} (one seed, no interval)"
        return f"{self.detail}: {k * d.mean:+.2f} [{k * d.low:+.2f}, {k * d.high:+.2f}] {self.unit}"


    def line(self, with_claim: bool = False) -> str:
        """One Markdown bullet: the subject, its complete cells, the verdict and the evidence."""
        claim = f"{self.claim.split(' (')[0]} — " if with_claim else ""
        cells = f" ({self.cells})" if self.cells else ""
        gated = f" (gated: {self.gated_text()})" if self.gated else ""
        return f"- {claim}{self.subject}{cells}: **{self.verdict}** — {self.evidence()}{gated}"

    def gated_text(self) -> str:
        """The gated arms as one field: "MAR; MAE" (empty when the claim reads no gate)."""
        return "; ".join(self.gated)

    def oriented(self) -> tuple[float, float, float] | None:
        """(difference, low, high) in the finding's unit, signed so that > 0 is the paper's direction;
        None for an untestable claim (the interval is nan with one seed)."""
        if self.difference is None:
            return None
        d, k = self.difference, self.scale * self.expected_sign
        low, high = sorted((k * d.low, k * d.high))
        return k * d.mean, low, high


def unpaired_seeds(what: str, seed_sets: list) -> str | None:
    """Why ``what`` (cells, columns) cannot be paired seed by seed, or None: they ran different seeds
    (grids that set their own). ``seed_sets``: each one's seeds, in any iterable."""
    distinct = sorted({tuple(sorted(int(s) for s in seeds)) for seeds in seed_sets})
    if len(distinct) < 2:
        return None
    listed = " and ".join(", ".join(map(str, group)) for group in distinct)
    return f"{what} ran different seeds ({listed}): give their grids the same seeds"


def compare(a: pd.DataFrame, b: pd.DataFrame, expected_sign: int) -> tuple[Interval, str]:
    """Paired difference a - b over the seeds of two cells and the verdict on "sign(a - b) = expected"."""
    diff = paired_difference(accuracy_by_seed(a), accuracy_by_seed(b))
    return diff, verdict(diff, expected_sign)


def difference_of_differences(a1: pd.DataFrame, a0: pd.DataFrame, b1: pd.DataFrame, b0: pd.DataFrame,
                              expected_sign: int) -> tuple[Interval, str]:
    """Paired (a1 - a0) - (b1 - b0) per seed: e.g. MAE's non-IID change minus SimSiam's."""
    a1s, a0s, b1s, b0s = (accuracy_by_seed(x) for x in (a1, a0, b1, b0))
    seeds = set(a1s) & set(a0s) & set(b1s) & set(b0s)
    if not seeds or any(set(x) != seeds for x in (a1s, a0s, b1s, b0s)):
        raise ValueError(f"the four cells have different seeds: {[sorted(x) for x in (a1s, a0s, b1s, b0s)]}")
    left = {s: a1s[s] - a0s[s] for s in seeds}
    right = {s: b1s[s] - b0s[s] for s in seeds}
    diff = paired_difference(left, right)
    return diff, verdict(diff, expected_sign)


@dataclass(frozen=True)
class GateResult:
    """Whether a pretrained cell beats its random-init backbone, with the paired margin."""

    passed: bool
    margin: Interval | None
    reason: str


class PretrainingGate:
    """Does a cell's pretraining beat the same backbone from random init, by seed, on the same protocol?

    The random-init runs are the framework ``random`` results of the same backbone, downstream dataset and
    protocol. A cell passes when the whole 95 % interval of (pretrained - random) lies above 0.
    """

    def __init__(self, results: pd.DataFrame):
        self.random = results[results["framework"] == RANDOM]

    def baseline(self, cell: pd.DataFrame) -> pd.DataFrame:
        """The random-init runs a cell pairs with: its backbone, dataset and protocol, on the cell's seeds (the
        reference runs every seed any cell of the backbone runs; a grid may give its cells more seeds)."""
        first = cell.iloc[0]
        return self.random[(self.random["backbone"] == first["backbone"])
                           & (self.random["dataset"] == first["dataset"])
                           & (self.random["protocol"] == first["protocol"])
                           & self.random["seed"].isin(cell["seed"])]

    def check(self, cell: pd.DataFrame) -> GateResult:
        baseline = self.baseline(cell)
        first = cell.iloc[0]
        if baseline.empty:
            return GateResult(False, None, f"no random-init {first['backbone']} run with "
                                           f"{first['protocol']} on {first['dataset']} to compare with")
        try:
            margin, outcome = compare(cell, baseline, +1)
        except ValueError as err:
            return GateResult(False, None, f"cannot pair with random init: {err}")
        if outcome == SUPPORTED:
            return GateResult(True, margin, "beats random init")
        return GateResult(False, margin, f"pretraining does not beat random init "
                                         f"({100 * margin.mean:+.2f} pp, {_interval_words(margin)})")

    def untestable(self, cells: dict[str, pd.DataFrame]) -> str | None:
        """None when every named cell passes; else the reason naming the cells that fail."""
        failing = [f"{name}: {result.reason}" for name, cell in cells.items()
                   if not (result := self.check(cell)).passed]
        if not failing:
            return None
        return UNTESTABLE_PREFIX + "; ".join(failing)


def gate_failures(detail: str) -> list[str]:
    """The labels of the cells an untestable finding's ``detail`` (``PretrainingGate.untestable``) names as
    not beating random init; empty when the detail has another form."""
    if not detail.startswith(UNTESTABLE_PREFIX):
        return []
    return [part.split(": ", 1)[0] for part in detail[len(UNTESTABLE_PREFIX):].split("; ")]


def _interval_words(diff: Interval) -> str:
    if not diff.defined:
        return "one seed"
    return f"95 % interval [{100 * diff.low:+.2f}, {100 * diff.high:+.2f}]"

"""Paired claim checks and the gate on pretraining, on constructed results with known answers."""

from __future__ import annotations

import pandas as pd
import pytest

from dssl.reporting.claims import UNTESTABLE, PretrainingGate, compare, difference_of_differences
from dssl.reporting.stats import CONTRADICTED, INCONCLUSIVE, SUPPORTED

from report_helpers import result


def cell(accuracies, **fields) -> pd.DataFrame:
    return pd.DataFrame([result(test_acc=a, seed=s, **fields) for s, a in enumerate(accuracies)])


def test_paired_comparison_verdicts():
    base = [0.80, 0.85, 0.90]
    # a constant shift is a zero-variance difference: any nonzero shift is decided
    assert compare(cell([b - 0.02 for b in base]), cell(base), -1)[1] == SUPPORTED
    assert compare(cell([b + 0.02 for b in base]), cell(base), -1)[1] == CONTRADICTED
    diff, outcome = compare(cell([0.81, 0.84, 0.90]), cell(base), -1)
    assert outcome == INCONCLUSIVE and diff.low < 0 < diff.high
    assert diff.mean == pytest.approx(0.0)


def test_pairing_uses_seeds_not_order():
    a = pd.concat([cell([0.9, 0.5, 0.7]).iloc[::-1]])
    b = cell([0.8, 0.4, 0.6])
    diff, outcome = compare(a, b, +1)
    assert diff.mean == pytest.approx(0.1) and outcome == SUPPORTED


def test_repeated_seed_is_an_error():
    mixed = pd.concat([cell([0.9]), cell([0.8])])
    with pytest.raises(ValueError, match="occur more than once"):
        compare(mixed, cell([0.7]), +1)


def test_difference_of_differences():
    mae_non, mae_iid = cell([0.78, 0.79, 0.80]), cell([0.80, 0.81, 0.82])      # MAE drops 2 pp
    ss_non, ss_iid = cell([0.70, 0.72, 0.73]), cell([0.80, 0.81, 0.82])        # SimSiam drops 9-10 pp
    diff, outcome = difference_of_differences(mae_non, mae_iid, ss_non, ss_iid, +1)
    assert diff.mean == pytest.approx((0.08 + 0.07 + 0.07) / 3)   # per seed: -0.02 - (-0.10, -0.09, -0.09)
    assert outcome == SUPPORTED


def test_gate_passes_only_when_the_interval_is_above_zero():
    random = cell([0.70, 0.72, 0.71], framework="random", method=None, scheme=None)
    results = pd.concat([random])
    gate = PretrainingGate(results)
    assert gate.check(cell([0.80, 0.83, 0.81])).passed
    failed = gate.check(cell([0.71, 0.70, 0.73]))
    assert not failed.passed and "does not beat random init" in failed.reason
    assert failed.margin is not None
    other_protocol = gate.check(cell([0.9, 0.9, 0.9], protocol="linear_probe"))
    assert not other_protocol.passed and other_protocol.margin is None
    blocked = gate.untestable({"good": cell([0.80, 0.83, 0.81]), "bad": cell([0.71, 0.70, 0.73])})
    assert blocked.startswith("untestable at this scale") and "bad:" in blocked and "good:" not in blocked
    assert gate.untestable({"good": cell([0.80, 0.83, 0.81])}) is None
    assert UNTESTABLE == "untestable"


def test_the_gate_pairs_a_cell_with_the_reference_runs_of_its_own_seeds():
    """The random-init reference runs every seed any cell of its backbone runs (a grid may give its cells
    more); a 3-seed cell pairs with seeds 0-2 of a 5-seed reference, and a seed the reference lacks is an
    error naming it rather than a silently shorter pairing."""
    random = cell([0.70, 0.72, 0.71, 0.10, 0.10], framework="random", method=None, scheme=None)
    gate = PretrainingGate(random)
    three = cell([0.80, 0.83, 0.81])
    assert list(gate.baseline(three)["seed"]) == [0, 1, 2]
    result = gate.check(three)
    assert result.passed and result.margin.n == 3
    assert result.margin.mean == pytest.approx((0.10 + 0.11 + 0.10) / 3)
    six = cell([0.80, 0.83, 0.81, 0.5, 0.5, 0.5])
    missing = gate.check(six)
    assert not missing.passed and "cannot pair with random init" in missing.reason and "[5]" in missing.reason

"""Intervals over seeds, the Wilson interval, paired differences and verdicts, against hand computations."""

from __future__ import annotations

import math

import pytest

from dssl.reporting.stats import (
    CONTRADICTED,
    INCONCLUSIVE,
    SUPPORTED,
    VERDICTS,
    Interval,
    binomial_interval,
    format_interval,
    paired_difference,
    seed_interval,
    verdict,
)

# Student-t quantiles in closed form: 2 degrees of freedom t_p = (2p - 1) / sqrt(2p(1 - p)),
# 1 degree of freedom (Cauchy) t_p = tan(pi (p - 1/2)).
T_975_2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # 4.302653 (tables: 4.303)
T_95_1 = math.tan(math.pi * 0.45)  # 6.313752
Z_975 = 1.959963984540054  # standard normal quantile, 0.975


def test_seed_interval_by_hand():
    iv = seed_interval([1.0, 2.0, 3.0])
    # mean 2, sd 1, half-width t * 1 / sqrt(3)
    assert iv.mean == 2.0 and iv.n == 3
    assert iv.half_width == pytest.approx(T_975_2 / math.sqrt(3), rel=1e-9)
    assert iv.half_width == pytest.approx(2.484138, abs=1e-6)
    assert (iv.low, iv.high) == pytest.approx((2 - iv.half_width, 2 + iv.half_width))
    assert "Student-t over seeds" in iv.method


def test_seed_interval_other_confidence_and_constant_values():
    iv = seed_interval([0.8, 0.9], confidence=0.9)
    # n = 2: sd = 0.1 / sqrt(2), t_{0.95, 1} = 6.313752
    assert iv.half_width == pytest.approx(T_95_1 * (0.1 / math.sqrt(2)) / math.sqrt(2), rel=1e-9)
    flat = seed_interval([0.5, 0.5, 0.5])
    assert flat.half_width == 0.0 and flat.low == flat.high == 0.5


def test_single_seed_has_no_interval():
    iv = seed_interval([0.7])
    assert iv.mean == 0.7 and iv.n == 1 and not iv.defined
    assert math.isnan(iv.half_width) and math.isnan(iv.low) and math.isnan(iv.high)
    assert "single seed" in iv.method
    assert format_interval(iv) == "70.0"


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")]])
def test_seed_interval_rejects_empty_or_nan(bad):
    with pytest.raises(ValueError):
        seed_interval(bad)


def test_wilson_interval_by_hand():
    p, n, z = 45 / 50, 50, Z_975
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    iv = binomial_interval(p, n)
    assert iv.mean == p and iv.n == 50
    assert (iv.low, iv.high) == pytest.approx((centre - half, centre + half), rel=1e-9)
    assert (iv.low, iv.high) == pytest.approx((0.7864, 0.9565), abs=1e-4)  # published tables
    assert iv.half_width == pytest.approx(half) and "Wilson" in iv.method
    assert iv.low < p < iv.high and iv.high - p < p - iv.low  # pulled towards 1/2


def test_wilson_interval_at_the_edges_stays_in_range():
    perfect = binomial_interval(1.0, 20)
    assert perfect.high == pytest.approx(1.0) and 0.8 < perfect.low < 1.0
    zero = binomial_interval(0.0, 20)
    assert zero.low == pytest.approx(0.0, abs=1e-12) and zero.high > 0
    with pytest.raises(ValueError):
        binomial_interval(1.2, 20)
    with pytest.raises(ValueError):
        binomial_interval(0.5, 0)


def test_paired_difference_pairs_by_seed():
    a = {0: 0.80, 1: 0.85, 2: 0.90}
    b = {2: 0.87, 0: 0.78, 1: 0.82}  # order does not matter, seeds do
    iv = paired_difference(a, b)
    expected = seed_interval([0.02, 0.03, 0.03])
    assert iv.mean == pytest.approx(expected.mean) and iv.half_width == pytest.approx(expected.half_width)
    assert iv.n == 3 and iv.method.startswith("paired Student-t over seeds")


def test_paired_difference_names_missing_seeds():
    with pytest.raises(ValueError, match=r"missing from b: \[2\], missing from a: \[5\]"):
        paired_difference({0: 1.0, 1: 1.0, 2: 1.0}, {0: 1.0, 1: 1.0, 5: 1.0})


def _diff(low: float, high: float, n: int = 3) -> Interval:
    return Interval((low + high) / 2, low, high, (high - low) / 2, n, "test")


@pytest.mark.parametrize(("low", "high", "sign", "expected"), [
    (0.01, 0.05, +1, SUPPORTED),
    (-0.05, -0.01, +1, CONTRADICTED),
    (-0.01, 0.05, +1, INCONCLUSIVE),
    (-0.05, -0.01, -1, SUPPORTED),
    (0.01, 0.05, -1, CONTRADICTED),
    (-0.05, 0.01, -1, INCONCLUSIVE),
    (0.0, 0.05, +1, INCONCLUSIVE),  # touching 0 is not strictly on one side
])
def test_verdict_on_constructed_intervals(low, high, sign, expected):
    assert verdict(_diff(low, high), sign) == expected


def test_verdict_from_paired_seeds_both_directions():
    better = paired_difference({0: 0.90, 1: 0.91, 2: 0.92}, {0: 0.80, 1: 0.82, 2: 0.81})
    assert verdict(better, +1) == SUPPORTED and verdict(better, -1) == CONTRADICTED
    noisy = paired_difference({0: 0.90, 1: 0.70, 2: 0.85}, {0: 0.80, 1: 0.82, 2: 0.81})
    assert verdict(noisy, +1) == INCONCLUSIVE and verdict(noisy, -1) == INCONCLUSIVE


def test_verdict_needs_two_seeds_and_a_sign():
    one = paired_difference({0: 0.9}, {0: 0.1})
    assert verdict(one, +1) == INCONCLUSIVE
    with pytest.raises(ValueError):
        verdict(_diff(0.1, 0.2), 0)
    assert set(VERDICTS) == {SUPPORTED, CONTRADICTED, INCONCLUSIVE}


def test_format_interval():
    assert format_interval(_diff(0.848, 0.872)) == "86.0 ± 1.2"
    assert format_interval(_diff(0.848, 0.872), scale=1, digits=3) == "0.860 ± 0.012"

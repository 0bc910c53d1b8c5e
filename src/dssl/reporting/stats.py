"""Uncertainty of results over seeds, and verdicts on a paper's claims.

Two different errors bound a reported accuracy, and they are kept apart:

- ``seed_interval``: the spread of the mean over independent runs (seeds) -- the pretraining and
  evaluation randomness. Paper A reports the mean of 3 trials; with so few seeds the Student-t quantile
  (4.30 for n = 3 at 95 %) makes the interval wide, which is the honest answer.
- ``binomial_interval``: the sampling error of one accuracy measured on a finite test set (Wilson score
  interval). Every seed of a cell is scored on the same test set, so the seed interval does not include it.

A claim "a beats b" is judged on the paired per-seed differences (``paired_difference``, ``verdict``):
pairing by seed removes the variation the two arms share (same partition, same data order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from scipy import stats

# The verdict vocabulary, declared once: reports and tests import these names.
SUPPORTED, CONTRADICTED, INCONCLUSIVE = VERDICTS = ("supported", "contradicted", "inconclusive")


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval ``[low, high]``.

    ``half_width`` is ``(high - low) / 2``; it is nan (and so are ``low`` and ``high``) when the interval
    is undefined (a single seed). ``method`` says how the interval was computed.
    """

    mean: float
    low: float
    high: float
    half_width: float
    n: int
    method: str

    @property
    def defined(self) -> bool:
        return not math.isnan(self.half_width)


def seed_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Student-t interval of the mean of one value per seed.

    mean = sum(x) / n,  sd = sqrt(sum((x - mean)^2) / (n - 1)),
    half_width = t_{(1 + confidence) / 2, n - 1} * sd / sqrt(n),  interval = mean -+ half_width.
    Assumes the per-seed values are independent and roughly normal. With n == 1 the interval is
    undefined: ``half_width`` is nan and ``method`` says so.
    """
    xs = _finite_values(values)
    _check_confidence(confidence)
    n = len(xs)
    mean = math.fsum(xs) / n
    if n == 1:
        nan = float("nan")
        return Interval(mean, nan, nan, nan, 1, "single seed: no interval")
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, half, n,
                    f"Student-t over seeds, {confidence:.0%} confidence, n = {n}")


def binomial_interval(accuracy: float, n_test: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval of one accuracy ``p`` measured on ``n_test`` test samples.

    With z = Phi^-1((1 + confidence) / 2):
      centre = (p + z^2 / (2 n)) / (1 + z^2 / n)
      half_width = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))
    (Wilson, JASA 1927). Unlike the normal approximation it stays inside [0, 1] and is not empty at
    p = 0 or 1. ``mean`` is the observed ``p``; the interval is centred on ``centre``, not on ``p``.
    """
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"accuracy must be in [0, 1], got {accuracy}")
    if n_test < 1:
        raise ValueError(f"n_test must be at least 1, got {n_test}")
    _check_confidence(confidence)
    z = float(stats.norm.ppf((1 + confidence) / 2))
    shrink = 1 + z * z / n_test
    centre = (accuracy + z * z / (2 * n_test)) / shrink
    half = z / shrink * math.sqrt(accuracy * (1 - accuracy) / n_test + z * z / (4 * n_test * n_test))
    return Interval(accuracy, centre - half, centre + half, half, n_test,
                    f"Wilson score interval over the test set, {confidence:.0%} confidence, n = {n_test}")


def paired_difference(a_by_seed: Mapping[int, float], b_by_seed: Mapping[int, float],
                      confidence: float = 0.95) -> Interval:
    """Student-t interval of the mean per-seed difference ``a[s] - b[s]``.

    Both arms must have the same seeds: a seed run for one arm only cannot be paired, and silently
    dropping it would change the estimate. Raises ``ValueError`` naming the seeds each side lacks.
    """
    only_a, only_b = sorted(set(a_by_seed) - set(b_by_seed)), sorted(set(b_by_seed) - set(a_by_seed))
    if only_a or only_b:
        raise ValueError(f"seeds differ: missing from b: {only_a}, missing from a: {only_b}")
    diffs = [a_by_seed[s] - b_by_seed[s] for s in sorted(a_by_seed)]
    iv = seed_interval(diffs, confidence)
    method = iv.method if not iv.defined else f"paired {iv.method}"
    return Interval(iv.mean, iv.low, iv.high, iv.half_width, iv.n, method)


def verdict(diff: Interval, expected_sign: int) -> str:
    """Judge a claim on the interval of ``a - b``: one of ``VERDICTS``.

    ``expected_sign`` is +1 when the paper claims a > b, -1 when it claims a < b. The claim is
    "supported" when the whole interval lies strictly on the expected side of 0, "contradicted" when it
    lies strictly on the other side, otherwise (or with fewer than 2 seeds) "inconclusive".
    """
    if expected_sign not in (1, -1):
        raise ValueError(f"expected_sign must be +1 or -1, got {expected_sign}")
    if diff.n < 2 or not diff.defined:
        return INCONCLUSIVE
    low, high = sorted((expected_sign * diff.low, expected_sign * diff.high))
    if low > 0:
        return SUPPORTED
    if high < 0:
        return CONTRADICTED
    return INCONCLUSIVE


def format_interval(iv: Interval, scale: float = 100, digits: int = 1) -> str:
    """``"86.0 ± 1.2"`` (mean and half-width times ``scale``); just the mean when undefined (n == 1)."""
    mean = f"{iv.mean * scale:.{digits}f}"
    if not iv.defined:
        return mean
    return f"{mean} ± {iv.half_width * scale:.{digits}f}"


def _finite_values(values: Sequence[float]) -> list[float]:
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("no values: an interval needs at least one seed")
    if not all(math.isfinite(x) for x in xs):
        raise ValueError(f"values must be finite, got {xs}")
    return xs


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")

"""Representability vector (Definition 4.1) and sensitivity (Theorem 4.4) on known answers."""

from __future__ import annotations

import numpy as np
import pytest

from dssl.theory.sensitivity import representability_vector, row_space_basis, sensitivity


def test_coordinate_axes():
    d = 6
    w = np.zeros((3, d))
    w[0, 0], w[1, 2], w[2, 5] = 2.0, -0.5, 7.0  # rows along e_1, e_3, e_6 with arbitrary scales
    r = representability_vector(w)
    np.testing.assert_allclose(r, [1, 0, 1, 0, 0, 1])
    assert sensitivity(r, 3) == pytest.approx(1.0)
    assert sensitivity(r, 1) == 0.0


def test_uniform_direction():
    d = 4
    r = representability_vector(np.ones((1, d)))
    np.testing.assert_allclose(r, np.full(d, 0.25))
    assert sensitivity(r, d) == pytest.approx(0.0, abs=1e-15)


def test_random_orthonormal_basis_properties():
    rng = np.random.default_rng(0)
    d, c = 10, 4
    q, _ = np.linalg.qr(rng.standard_normal((d, c)))
    r = representability_vector(basis=q)
    assert r.sum() == pytest.approx(c)  # trace of a rank-c projector
    assert np.all(r >= -1e-15) and np.all(r <= 1 + 1e-15)
    np.testing.assert_allclose(r, np.diag(q @ q.T))
    # full space: every coordinate fully represented
    np.testing.assert_allclose(representability_vector(rng.standard_normal((d, d))), np.ones(d))


def test_invariant_to_basis_of_row_space():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 8))
    for _ in range(5):
        q = rng.standard_normal((3, 3))  # invertible with probability one
        np.testing.assert_allclose(representability_vector(q @ w), representability_vector(w), atol=1e-12)
    # extra dependent rows do not change the row space either
    np.testing.assert_allclose(
        representability_vector(np.vstack([w, w[0] + w[1]])), representability_vector(w), atol=1e-12
    )


def test_rank_deficient_and_validation():
    w = np.zeros((3, 5))
    w[0, 1] = 1.0
    assert row_space_basis(w).shape == (5, 1)
    assert row_space_basis(np.zeros((2, 5))).shape == (5, 0)
    with pytest.raises(ValueError):
        representability_vector()
    with pytest.raises(ValueError):
        sensitivity(np.ones(3), 4)

"""Matrices X of the objectives (appendix A.6) on hand-checkable cases, and their consistency."""

from __future__ import annotations

import numpy as np
import pytest

from dssl.theory.objectives import (
    METHODS,
    HSpec,
    WeightedObjective,
    assumption_a9_trace,
    augmentation_rngs,
    build_client_objective,
    check_assumption_a9,
    client_matrices,
    combine,
    decl_global_weights,
    expected_matrix,
    global_weights,
    make_h,
    make_views,
    neighbourhood_weights,
    validate_adjacency,
    views_matrix,
)

from theory_helpers import complete_graph, cycle_graph, path_graph

X1 = np.array([[1.0, 2.0, 3.0]])  # one sample, d = 3


def test_mim_matrix_hand_case():
    # E_m[x*(1-m) (x*m)^T] = p(1-p) (x x^T - Diag(x^2)): zero diagonal because m_k (1 - m_k) = 0.
    m = expected_matrix("mim", X1, p=0.5, h=HSpec(), mim_form="derived")
    expected = 0.25 * np.array([[0.0, 2.0, 3.0], [2.0, 0.0, 6.0], [3.0, 6.0, 0.0]])
    np.testing.assert_allclose(m, expected)
    printed = expected_matrix("mim", X1, p=0.5, h=HSpec(), mim_form="paper_eq17")
    np.testing.assert_allclose(printed, 0.5 * np.diag([1.0, 4.0, 9.0]))  # Eq. (17) as printed


def test_cl_matrices_hand_case():
    np.testing.assert_allclose(expected_matrix("cl", X1, p=0.5, h=HSpec()), X1.T @ X1)
    shift = HSpec(kind="shift", shift=1)  # H e_k = e_{k+1}: H x = (3, 1, 2)
    hx = np.array([3.0, 1.0, 2.0])
    np.testing.assert_allclose(shift.apply_rows(X1)[0], hx)
    np.testing.assert_allclose(shift.matrix(3) @ X1[0], hx)
    m = expected_matrix("cl_h", X1, p=0.5, h=shift)
    np.testing.assert_allclose(m, (np.outer(hx, X1[0]) + np.outer(X1[0], hx)) / 2.0)


def test_sampled_views_hand_case():
    # One view pair: M = sym(b a^T) (Eq. 43 with a single xi, xi' per sample).
    class Fixed:
        def __init__(self, value):
            self.value = value

        def standard_normal(self, shape):
            return np.broadcast_to(self.value, shape).copy()

    rngs = {"a": Fixed(np.array([0.5, 0.0, -1.0])), "b": Fixed(np.array([0.0, 1.0, 0.0]))}
    views = make_views("cl", X1, rngs, p=0.5, h=HSpec())
    a, b = X1[0] + [0.5, 0.0, -1.0], X1[0] + [0.0, 1.0, 0.0]
    np.testing.assert_allclose(views_matrix(views), (np.outer(a, b) + np.outer(b, a)) / 2.0)


def test_mim_expectation_matches_monte_carlo():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5))
    p = 0.75
    sampled = views_matrix(make_views("mim", x, {"mask": rng}, p=p, h=HSpec(), n_views=40_000))
    np.testing.assert_allclose(sampled, expected_matrix("mim", x, p=p, h=HSpec()), atol=0.02)
    assert np.abs(np.diag(sampled)).max() == 0.0


def test_cl_expectation_matches_monte_carlo():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5))
    h = make_h({"kind": "blend", "weight": 0.5, "shift": 1})
    for method in ("cl", "cl_h"):
        rngs = {"a": np.random.default_rng(2), "b": np.random.default_rng(3)}
        sampled = views_matrix(make_views(method, x, rngs, p=0.5, h=h, n_views=40_000))
        np.testing.assert_allclose(sampled, expected_matrix(method, x, p=0.5, h=h), atol=0.03)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("mode", ["sampled", "expected"])
def test_objective_value_is_minus_trace_plus_regulariser(tiny_dataset, method, mode):
    x = tiny_dataset.clients[0].x
    obj = build_client_objective(method, x, augmentation_rngs(0, 16, 0), mode=mode, p=0.75, h=make_h(None))
    w = np.random.default_rng(4).standard_normal((4, 16))
    m = obj.matrix()
    expected = -np.trace(w @ m @ w.T) + 0.5 * np.linalg.norm(w.T @ w) ** 2
    assert obj.value(w) == pytest.approx(expected, rel=1e-10)
    np.testing.assert_allclose(obj.grad(w), -2.0 * w @ m + 2.0 * w @ w.T @ w, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_gradient_matches_finite_differences(tiny_dataset, method):
    x = tiny_dataset.clients[1].x[:10, :6]
    obj = build_client_objective(method, x, augmentation_rngs(0, 6, 1), mode="expected", p=0.75, h=make_h(None))
    w = np.random.default_rng(5).standard_normal((3, 6))
    g = obj.grad(w)
    eps = 1e-6
    for idx in [(0, 0), (1, 3), (2, 5)]:
        dw = np.zeros_like(w)
        dw[idx] = eps
        fd = (obj.value(w + dw) - obj.value(w - dw)) / (2 * eps)
        assert fd == pytest.approx(g[idx], rel=1e-5, abs=1e-6)


def test_client_matrices_equal_views_path(tiny_dataset):
    x = tiny_dataset.clients[0].x
    h = make_h(None)
    modes = {m: "sampled" for m in METHODS}
    fast = client_matrices(x, list(METHODS), augmentation_rngs(0, 16, 0), modes=modes, p=0.75, h=h, n_views=2)
    for method in METHODS:
        views = make_views(method, x, augmentation_rngs(0, 16, 0), p=0.75, h=h, n_views=2)
        np.testing.assert_allclose(fast[method], views_matrix(views), rtol=1e-12, atol=1e-12)


def test_decl_weights_path_graph():
    # |A| = (2, 3, 2): pi_0 = (1/2 + 1/3)/3, pi_1 = (1/2 + 1/3 + 1/2)/3, pi_2 = pi_0.
    np.testing.assert_allclose(decl_global_weights(path_graph(3)), [5 / 18, 8 / 18, 5 / 18])
    omega = neighbourhood_weights(path_graph(3))
    np.testing.assert_allclose(omega[1], [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(omega[0], [1 / 2, 1 / 2, 0])


def test_regular_and_complete_graphs_give_fl_weights():
    for adjacency in (cycle_graph(6), complete_graph(5)):
        n = len(adjacency)
        np.testing.assert_allclose(decl_global_weights(adjacency), np.full(n, 1.0 / n))
        np.testing.assert_allclose(global_weights("decl", n, adjacency), global_weights("fl", n))


def test_global_matrix_is_weighted_sum(tiny_dataset):
    objs = [
        build_client_objective("mim", c.x, None, mode="expected", p=0.75, h=make_h(None))
        for c in tiny_dataset.clients
    ]
    weights = np.array([0.3, 0.7])
    stack = np.stack([o.matrix() for o in objs])
    np.testing.assert_allclose(WeightedObjective(objs, weights).matrix(), combine(stack, weights))


def test_adjacency_validation():
    with pytest.raises(ValueError, match="self loops"):
        validate_adjacency(np.eye(3, dtype=bool))
    bad = np.zeros((3, 3), dtype=bool)
    bad[0, 1] = True
    with pytest.raises(ValueError, match="symmetric"):
        validate_adjacency(bad)


def test_assumption_a9():
    assert assumption_a9_trace(HSpec(kind="blend", weight=0.5, shift=1), 16, 4) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="A.9"):
        check_assumption_a9(HSpec(kind="shift", shift=1), 16, 4)
    rotation = HSpec(kind="rotation", angle=0.1, seed=0)
    hm = rotation.matrix(8)
    np.testing.assert_allclose(hm @ hm.T, np.eye(8), atol=1e-12)
    assert check_assumption_a9(rotation, 8, 4) > 0
    with pytest.raises(ValueError, match="unknown H"):
        make_h({"kind": "mirror"})

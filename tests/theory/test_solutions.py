"""Closed-form stationary points vs gradient descent on the same empirical objectives."""

from __future__ import annotations

import numpy as np
import pytest

from dssl.theory.data_model import SampleSizes, generate_dataset
from dssl.theory.objectives import (
    METHODS,
    WeightedObjective,
    augmentation_rngs,
    build_client_objective,
    decl_global_weights,
    global_weights,
    make_h,
)
from dssl.theory.solutions import (
    batched_representability,
    closed_form_solution,
    gradient_descent,
    max_principal_angle,
)
from dssl.theory.sensitivity import representability_vector

from theory_helpers import path_graph

C = 4
ANGLE_TOL = 1e-4  # radians; GD stops at ||grad|| <= 1e-9 ||M||^1.5 and reaches ~1e-7 here


def _objectives(dataset, method, mode):
    h = make_h({"kind": "blend", "weight": 0.5, "shift": 1})
    return [
        build_client_objective(
            method, c.x, augmentation_rngs(dataset.seed, dataset.d, c.client), mode=mode, p=0.75, h=h
        )
        for c in dataset.clients
    ]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("mode", ["sampled", "expected"])
def test_closed_form_matches_gd_local_and_fl(tiny_dataset, method, mode):
    objs = _objectives(tiny_dataset, method, mode)
    n = len(objs)
    for obj in (objs[0], WeightedObjective(objs, global_weights("fl", n))):
        sol = closed_form_solution(obj.matrix(), C)
        assert sol.rank == C and sol.gap > 0  # the row space is well defined
        gd = gradient_descent(obj, C, seed=1)
        assert gd.converged
        assert max_principal_angle(sol.w, gd.w) < ANGLE_TOL
        assert obj.value(gd.w) == pytest.approx(obj.value(sol.w), rel=1e-8)


@pytest.mark.parametrize("method", METHODS)
def test_closed_form_matches_gd_decl(method):
    # DecL on a path of 3 clients: GD on (1/N) sum_i (1/|A_i|) sum_{j in A_i} L_j, summed client by
    # client, against the top-c eigenspace of sum_j pi_j X_j (Eqs. 25-26).
    dataset = generate_dataset(18, 3, seed=2, sizes=SampleSizes(20, 3))
    objs = _objectives(dataset, method, "sampled")
    adjacency = path_graph(3)
    omega = np.where(adjacency | np.eye(3, dtype=bool), 1.0, 0.0)
    omega /= omega.sum(axis=1, keepdims=True)

    class DecL:
        def matrix(self):
            return WeightedObjective(objs, decl_global_weights(adjacency)).matrix()

        def value(self, w):
            return np.mean([sum(o[j] * objs[j].value(w) for j in range(3)) for o in omega])

        def grad(self, w):
            return np.mean([sum(o[j] * objs[j].grad(w) for j in range(3)) for o in omega], axis=0)

    c = 6
    sol = closed_form_solution(DecL().matrix(), c)
    gd = gradient_descent(DecL(), c, seed=3)
    assert gd.converged and sol.gap > 0
    assert max_principal_angle(sol.w, gd.w) < ANGLE_TOL


def test_closed_form_is_positive_part_of_top_c():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    vals = np.array([5.0, 3.0, 1.0, -0.5, -2.0, 0.2])
    m = q @ np.diag(vals) @ q.T
    sol = closed_form_solution(m, 3)
    top = q[:, [0, 1, 2]]
    np.testing.assert_allclose(sol.w.T @ sol.w, top @ np.diag([5.0, 3.0, 1.0]) @ top.T, atol=1e-12)
    assert sol.next_eigval == pytest.approx(0.2)
    # Only two positive eigenvalues among the top 5: the minimiser has rank 2 < c (rows of zeros).
    sol5 = closed_form_solution(q @ np.diag([5.0, 3.0, -1.0, -0.5, -2.0, -0.2]) @ q.T, 5)
    assert sol5.rank == 2 and sol5.basis.shape == (6, 2)
    np.testing.assert_allclose(np.linalg.norm(sol5.w, axis=1)[2:], 0.0)


def test_rank_deficient_gd_agrees():
    # Eq. (17)'s printed MIM matrix is diagonal; with c above its positive count GD must also stop at
    # the positive part (checks that non-positive directions decay).
    rng = np.random.default_rng(1)
    q, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    m = q @ np.diag([4.0, 2.0, -1.0, -1.0, -2.0, -3.0, -0.5, -0.1]) @ q.T

    class Quadratic:
        def matrix(self):
            return m

        def value(self, w):
            return -np.trace(w @ m @ w.T) + 0.5 * np.linalg.norm(w.T @ w) ** 2

        def grad(self, w):
            return -2 * w @ m + 2 * w @ w.T @ w

    sol = closed_form_solution(m, 4)
    gd = gradient_descent(Quadratic(), 4, seed=0)
    assert sol.rank == 2 and gd.converged
    assert max_principal_angle(sol.w, gd.w, rtol=1e-3) < ANGLE_TOL


def test_batched_representability_matches_single(tiny_dataset):
    objs = _objectives(tiny_dataset, "cl", "sampled")
    stack = np.stack([o.matrix() for o in objs])
    batched = batched_representability(stack, C)
    for m, r in zip(stack, batched):
        sol = closed_form_solution(m, C)
        np.testing.assert_allclose(r, representability_vector(basis=sol.basis), atol=1e-10)

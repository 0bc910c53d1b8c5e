"""Stationary points of the linear objectives: closed form, gradient descent, principal angles.

Closed form (docs/theory.md, "Stationary points"). For symmetric M,

    L(W) = -tr(W M W^T) + 1/2 ||W^T W||_F^2 = 1/2 ||W^T W - M||_F^2 - 1/2 ||M||_F^2,

so minimising L is the best PSD rank-<=c approximation of M in Frobenius norm (Eckart-Young-Mirsky,
as the paper argues after Eq. 18): W^T W = sum_{j<=c} max(lambda_j, 0) v_j v_j^T with lambda_1 >= ...
the eigenvalues of M. The row space of W is the span of the top-c eigenvectors *with positive
eigenvalue*; when fewer than c eigenvalues are positive the minimiser has rank < c (Assumption A.5
then fails and we report the lower rank). The paper's stationary condition W^T W = X (Eq. 16) holds
only when rank(X) <= c; in general the stationarity condition is W M = W W^T W, i.e. P_R M = W^T W.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from dssl.theory.sensitivity import representability_from_basis, row_space_basis, sensitivity


@dataclass
class StationarySolution:
    """The closed-form minimiser: ``w`` (c x d), an orthonormal ``basis`` (d x rank) of row(W)."""

    w: np.ndarray
    basis: np.ndarray
    eigvals: np.ndarray
    next_eigval: float | None
    rank: int

    @property
    def gap(self) -> float:
        """lambda_c - lambda_{c+1}: the row space is well defined (and GD converges) when > 0."""
        if self.next_eigval is None:
            return float("inf")
        return float(self.eigvals[-1] - self.next_eigval)

    @property
    def relative_gap(self) -> float:
        top = float(np.max(np.abs(self.eigvals))) if self.eigvals.size else 0.0
        return self.gap / top if top > 0 else 0.0


def top_eigenpairs(m: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest eigenpairs of symmetric m, eigenvalues descending (LAPACK evr on the subset)."""
    d = m.shape[0]
    k = min(k, d)
    vals, vecs = scipy.linalg.eigh(m, subset_by_index=[d - k, d - 1], driver="evr")
    return vals[::-1], vecs[:, ::-1]


def positive_mask(vals: np.ndarray, rtol: float, scale: float) -> np.ndarray:
    """Eigenvalues counted as positive: > rtol * scale (scale = largest |eigenvalue| of M)."""
    return vals > rtol * max(scale, np.finfo(float).tiny)


def closed_form_solution(m: np.ndarray, c: int, *, rtol: float = 1e-10) -> StationarySolution:
    """Global minimiser of -tr(W M W^T) + 1/2 ||W^T W||_F^2 over W in R^{c x d} (module docstring).

    Rows of ``w`` for non-positive eigenvalues are zero, so rank(W) = number of positive eigenvalues
    among the top c. ``basis`` holds only the eigenvectors with positive eigenvalue.
    """
    d = m.shape[0]
    if not 1 <= c <= d:
        raise ValueError(f"c={c} must lie in 1..d={d}")
    m = (m + m.T) / 2.0
    vals, vecs = top_eigenpairs(m, c + 1 if c < d else c)
    next_val = float(vals[c]) if c < d else None
    vals, vecs = vals[:c], vecs[:, :c]
    scale = float(max(abs(vals[0]), abs(vals[-1]), abs(next_val or 0.0)))
    pos = positive_mask(vals, rtol, scale)
    w = (np.sqrt(np.where(pos, vals, 0.0))[:, None]) * vecs.T
    return StationarySolution(w=w, basis=vecs[:, pos], eigvals=vals, next_eigval=next_val, rank=int(pos.sum()))


def solution_sensitivities(sol: StationarySolution, windows: dict[str, int]) -> dict[str, float]:
    """Sensitivity s = max_k r_k - min_k r_k over each named window of leading coordinates."""
    r = representability_from_basis(sol.basis)
    return {name: sensitivity(r, k) for name, k in windows.items()}


def batched_representability(m_stack: np.ndarray, c: int, *, rtol: float = 1e-10) -> np.ndarray:
    """Representability vectors (m, d) of the closed-form solutions of a stack of matrices (m, d, d).

    Uses numpy's batched eigh (all eigenpairs): fast for the small d of candidate evaluation.
    """
    vals, vecs = np.linalg.eigh((m_stack + np.swapaxes(m_stack, 1, 2)) / 2.0)
    top_vals, top_vecs = vals[:, -c:], vecs[:, :, -c:]
    # same positivity scale as closed_form_solution: the largest |eigenvalue| among the top c+1
    scale = np.max(np.abs(vals[:, -(c + 1):]), axis=1, keepdims=True)
    pos = top_vals > rtol * np.maximum(scale, np.finfo(float).tiny)
    return np.einsum("mkj,mj->mk", top_vecs**2, pos.astype(float))


# --------------------------------------------------------------------------------------------------
# Gradient descent on the same empirical objective (cross-check of the closed form)
# --------------------------------------------------------------------------------------------------
@dataclass
class GDResult:
    w: np.ndarray
    n_steps: int
    converged: bool
    grad_norm: float
    losses: list[float] = field(default_factory=list)


def gradient_descent(
    objective,
    c: int,
    *,
    seed: int = 0,
    lr: float | None = None,
    max_steps: int = 50_000,
    tol: float = 1e-9,
    init_scale: float = 1e-2,
    check_every: int = 25,
) -> GDResult:
    """Plain full-batch gradient descent on ``objective`` (anything with ``value``, ``grad``, ``matrix``).

    The gradient comes from the objective's samples and views (objectives.ClientObjective), not from
    the matrix; the matrix only sets the step size lr = 0.25 / ||M||_2 (the Hessian of
    1/2 ||W^T W - M||^2 is bounded by about 4 ||M||_2 near the minimiser) and the stopping scale.
    Starts from a small random W so that GD escapes the saddle at W = 0 (strict saddles only).
    Stops when ||grad||_F <= tol * ||M||_2^(3/2).
    """
    m = objective.matrix()
    d = m.shape[0]
    norm = float(np.max(np.abs(np.linalg.eigvalsh((m + m.T) / 2.0))))
    if norm == 0.0:
        raise ValueError("objective matrix is zero: every W with W W^T W = 0 is stationary")
    lr = 0.25 / norm if lr is None else lr
    rng = np.random.default_rng(seed)
    w = init_scale * np.sqrt(norm) * rng.standard_normal((c, d)) / np.sqrt(d)
    threshold = tol * norm**1.5
    losses: list[float] = []
    grad_norm = float("inf")
    step = 0
    for step in range(1, max_steps + 1):
        g = objective.grad(w)
        w = w - lr * g
        if step % check_every == 0:
            grad_norm = float(np.linalg.norm(g))
            losses.append(float(objective.value(w)))
            if grad_norm <= threshold:
                return GDResult(w, step, True, grad_norm, losses)
    return GDResult(w, step, False, grad_norm, losses)


def principal_angles(w1: np.ndarray, w2: np.ndarray, *, rtol: float = 1e-6) -> np.ndarray:
    """Principal angles (radians, descending) between row(W1) and row(W2).

    Row spaces are taken from a rank-revealing SVD (singular values below rtol * the largest are
    dropped: GD leaves rows for non-positive eigenvalues at ~0 but not exactly 0).
    """
    b1 = row_space_basis(w1, rtol=rtol)
    b2 = row_space_basis(w2, rtol=rtol)
    if b1.shape[1] != b2.shape[1]:
        return np.full(max(b1.shape[1], b2.shape[1]), np.pi / 2)
    return scipy.linalg.subspace_angles(b1, b2)


def max_principal_angle(w1: np.ndarray, w2: np.ndarray, *, rtol: float = 1e-6) -> float:
    """Largest principal angle between the two row spaces (0 when they coincide)."""
    angles = principal_angles(w1, w2, rtol=rtol)
    return float(np.max(angles)) if angles.size else 0.0


# --------------------------------------------------------------------------------------------------
# A precomputed theory model for repeated sensitivity evaluations (topology improvement)
# --------------------------------------------------------------------------------------------------
@dataclass
class TheoryModel:
    """Client matrices (N, d, d) of one method for one (d, seed); global s for any weight vector.

    ``window`` is the number of leading coordinates :meth:`sensitivity` (and the "sensitivity"
    improvement criterion) uses: c for Theorem 4.4's definition, N for the client directions only.
    """

    client_mats: np.ndarray
    c: int
    window: int
    method: str
    d: int
    seed: int

    @property
    def n_clients(self) -> int:
        return int(self.client_mats.shape[0])

    def sensitivity(self, weights: np.ndarray) -> float:
        """s of the minimiser of sum_j pi_j L_j (Eq. 1) over the first ``window`` coordinates."""
        m = np.tensordot(np.asarray(weights, dtype=float), self.client_mats, axes=([0], [0]))
        sol = closed_form_solution(m, self.c)
        return sensitivity(representability_from_basis(sol.basis), self.window)

    def sensitivities(self, weights: np.ndarray) -> dict[str, float]:
        """s over the first c coordinates (Theorem 4.4) and over the first N, for one weight vector."""
        m = np.tensordot(np.asarray(weights, dtype=float), self.client_mats, axes=([0], [0]))
        r = representability_from_basis(closed_form_solution(m, self.c).basis)
        return {"sensitivity": sensitivity(r, self.c), "sensitivity_N": sensitivity(r, self.n_clients)}

    def batched_sensitivity(self, weights: np.ndarray) -> np.ndarray:
        """s for a stack of weight vectors (m, N) -> (m,), one batched eigen-decomposition."""
        m_stack = np.tensordot(np.asarray(weights, dtype=float), self.client_mats, axes=([1], [0]))
        r = batched_representability(m_stack, self.c)[:, : self.window]
        return r.max(axis=1) - r.min(axis=1)

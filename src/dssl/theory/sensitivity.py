"""Representability vector and sensitivity (paper A, Definition 4.1 and Theorem 4.4).

Definition 4.1: for R = row(W), r_k = ||Pi_R(e_k)||_2^2 = sum_j (e_k^T v_j)^2 for any orthonormal basis
{v_j} of R, i.e. r is the diagonal of the orthogonal projector onto R. It depends on R only, so it is
invariant under W -> Q W for any invertible Q, and 0 <= r_k <= 1 with sum_k r_k = dim R.

Theorem 4.4: sensitivity s = max_{k in [c]} r_k - min_{k in [c]} r_k, the spread of the leading c
coordinates. The proofs only bound r_k for k in [N] (the client signature directions), so we also
report the spread over the first N coordinates (``sensitivity_N`` in the sweep).
"""

from __future__ import annotations

import numpy as np


def row_space_basis(w: np.ndarray, *, rtol: float = 1e-10) -> np.ndarray:
    """Orthonormal basis (d x rank) of row(W) from an SVD; singular values <= rtol * max are dropped."""
    w = np.atleast_2d(np.asarray(w, dtype=float))
    if w.size == 0:
        return np.zeros((w.shape[1], 0))
    _, s, vt = np.linalg.svd(w, full_matrices=False)
    if s.size == 0 or s[0] == 0.0:
        return np.zeros((w.shape[1], 0))
    keep = s > rtol * s[0]
    return vt[keep].T


def representability_from_basis(basis: np.ndarray) -> np.ndarray:
    """r_k = sum_j basis[k, j]^2 for an orthonormal basis (columns) of R (Definition 4.1)."""
    return np.sum(np.asarray(basis, dtype=float) ** 2, axis=1)


def representability_vector(
    w: np.ndarray | None = None, *, basis: np.ndarray | None = None, rtol: float = 1e-10
) -> np.ndarray:
    """The representability vector r of row(W) (Definition 4.1); give ``w`` or an orthonormal ``basis``."""
    if (w is None) == (basis is None):
        raise ValueError("give exactly one of w (c x d) or basis (d x r, orthonormal columns)")
    if basis is None:
        basis = row_space_basis(w, rtol=rtol)
    return representability_from_basis(basis)


def sensitivity(r: np.ndarray, window: int) -> float | np.ndarray:
    """s = max_{k < window} r_k - min_{k < window} r_k (Theorem 4.4 with window = c).

    ``r`` may be one vector (returns a float) or a stack (..., d) (returns an array).
    """
    r = np.asarray(r, dtype=float)
    if not 1 <= window <= r.shape[-1]:
        raise ValueError(f"window={window} must lie in 1..d={r.shape[-1]}")
    head = r[..., :window]
    return float(np.max(head) - np.min(head)) if head.ndim == 1 else head.max(-1) - head.min(-1)

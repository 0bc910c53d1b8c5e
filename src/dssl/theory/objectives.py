"""Empirical objectives of paper A's linear theory and their matrices X (Section 3.2, appendix A.6).

Every local objective has the form (Eqs. 2, 4, 10, 39, 52)

    L(W) = -E[(W a)^T (W b)] + 1/2 ||W^T W||_F^2 = -tr(W M W^T) + 1/2 ||W^T W||_F^2,
    M = 1/2 E[b a^T + a b^T]                                         (Eqs. 16, 42, 54)

for a pair of views (a, b) of a sample x:

    "cl"    similar augmentations      a = x + xi,  b = x + xi',  xi, xi' ~ N(0, I)   (Eq. 39)
    "cl_h"  dissimilar augmentations   a = x + xi,  b = H x                           (Eq. 52)
    "mim"   masking, ratio p           a = x * m,   b = x * (1 - m), P(m_k = 0) = p   (Eq. 8-9)

M is the paper's X_i (X_i^C, X_i^C', X_i^M). Two augmentation modes:
- ``"sampled"``: draw ``n_views`` augmentations per sample and average over them, as Eqs. (43) and (55)
  do for CL (one xi, xi' per sample);
- ``"expected"``: average over the augmentation distribution in closed form, as Eq. (17) does for MIM:
  cl -> S, cl_h -> sym(H S), mim -> p(1-p) (S - Diag(S)), with S = (1/n) sum_j x_j x_j^T.

The MIM matrix printed as Eq. (17), 2p(1-p) Diag(S), does not follow from Eq. (4): m_k (1 - m_k) = 0,
so E[b a^T] has a zero diagonal and p(1-p) x_k x_l off it (derivation in docs/theory.md). The derived
form is the default; ``mim_form="paper_eq17"`` reproduces the printed one for comparison.

Global objectives (Eq. 1 and Eqs. 25-26, 34-35): FL averages the N local objectives, DecL averages the
neighbourhood averages, so both are sum_j pi_j L_j with pi from :func:`global_weights`, and their
matrix is sum_j pi_j M_j (the regulariser appears once because sum_j pi_j = 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import scipy.linalg

from dssl.theory.data_model import client_rng

METHODS = ("cl", "cl_h", "mim")
AUG_MODES = ("sampled", "expected")
MIM_FORMS = ("derived", "paper_eq17")
H_KINDS = ("identity", "scale", "shift", "blend", "rotation")
FRAMEWORKS = ("local", "decl", "fl")

# Augmentation streams, disjoint from the data streams of data_model (ids 0 and 1).
STREAM_VIEW_A = 10  # xi of the first view, shared by cl and cl_h (common random numbers)
STREAM_VIEW_B = 11  # xi' of the second cl view
STREAM_MASK = 12  # MIM masks


# --------------------------------------------------------------------------------------------------
# The dissimilar transformation H (Section 3.2, Assumption A.9)
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HSpec:
    """A linear image transformation H in R^{d x d} for dissimilar-augmentation CL.

    kinds: ``identity``; ``scale`` (scale * I); ``shift`` (cyclic translation by ``shift``
    coordinates); ``blend`` (weight * I + (1 - weight) * shift, the default: a partial translation);
    ``rotation`` (expm(angle * K), K a seeded random skew-symmetric matrix with ||K||_2 = 1).
    """

    kind: str = "blend"
    weight: float = 0.5
    shift: int = 1
    scale: float = 1.0
    angle: float = 0.1
    seed: int = 0

    def matrix(self, d: int) -> np.ndarray:
        """H as a dense d x d matrix."""
        return self.apply_rows(np.eye(d)).T

    def apply_rows(self, y: np.ndarray) -> np.ndarray:
        """Rows of y mapped by H: returns y H^T (each row x becomes (H x)^T)."""
        if self.kind == "identity":
            return y.copy()
        if self.kind == "scale":
            return self.scale * y
        if self.kind == "shift":
            return np.roll(y, self.shift, axis=-1)
        if self.kind == "blend":
            return self.weight * y + (1.0 - self.weight) * np.roll(y, self.shift, axis=-1)
        if self.kind == "rotation":
            return y @ _rotation_matrix(y.shape[-1], self.angle, self.seed).T
        raise ValueError(f"unknown H kind {self.kind!r}; known: {H_KINDS}")


@lru_cache(maxsize=8)
def _rotation_matrix(d: int, angle: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng([int(seed), int(d), 99])
    g = rng.standard_normal((d, d))
    skew = (g - g.T) / 2.0
    skew /= np.linalg.norm(skew, 2)
    return scipy.linalg.expm(angle * skew)


def make_h(spec: dict | HSpec | None) -> HSpec:
    """An :class:`HSpec` from a cfg dict such as ``{"kind": "blend", "weight": 0.5, "shift": 1}``."""
    if isinstance(spec, HSpec):
        return spec
    spec = dict(spec or {})
    unknown = set(spec) - set(HSpec.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown H spec keys {sorted(unknown)}; known: {sorted(HSpec.__dataclass_fields__)}")
    h = HSpec(**spec)
    if h.kind not in H_KINDS:
        raise ValueError(f"unknown H kind {h.kind!r}; known: {H_KINDS}")
    return h


def assumption_a9_trace(h: HSpec, d: int, c: int) -> float:
    """tr(P H_sym P) for P the projector on span{e_1..e_c} (Assumption A.9 requires it > 0)."""
    hm = h.matrix(d)
    return float(np.trace((hm + hm.T)[:c, :c]) / 2.0)


def check_assumption_a9(h: HSpec, d: int, c: int) -> float:
    """Raise ValueError when H violates Assumption A.9; return tr(P H_sym P) otherwise."""
    trace = assumption_a9_trace(h, d, c)
    if trace <= 0.0:
        raise ValueError(
            f"H spec {h} violates Assumption A.9: tr(P H_sym P) = {trace:.3g} <= 0 on the first c={c} "
            "coordinates (a pure cyclic shift has zero trace; blend it with the identity)"
        )
    return trace


# --------------------------------------------------------------------------------------------------
# Views and matrices
# --------------------------------------------------------------------------------------------------
@dataclass
class Views:
    """Sampled view pairs: row r of ``a`` and ``b`` are the two views of one (sample, draw)."""

    a: np.ndarray
    b: np.ndarray


def _check_method(method: str, mode: str, mim_form: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {METHODS}")
    if mode not in AUG_MODES:
        raise ValueError(f"unknown augmentation mode {mode!r}; known: {AUG_MODES}")
    if mim_form not in MIM_FORMS:
        raise ValueError(f"unknown mim_form {mim_form!r}; known: {MIM_FORMS}")


def _repeat(x: np.ndarray, n_views: int) -> np.ndarray:
    return x if n_views == 1 else np.tile(x, (n_views, 1))


def draw_xi(x: np.ndarray, rng: np.random.Generator, n_views: int) -> np.ndarray:
    """Unit-variance augmentation noise xi ~ N(0, I) for each of n_views copies of every sample."""
    return rng.standard_normal((x.shape[0] * n_views, x.shape[1]))


def draw_mask(x: np.ndarray, rng: np.random.Generator, n_views: int, p: float) -> np.ndarray:
    """Binary masks m with P(m_k = 0) = p, the mask ratio (Section 3.2, MIM formulation)."""
    return (rng.random((x.shape[0] * n_views, x.shape[1])) >= p).astype(x.dtype)


def make_views(
    method: str,
    x: np.ndarray,
    rngs: dict[str, np.random.Generator],
    *,
    p: float,
    h: HSpec,
    n_views: int = 1,
) -> Views:
    """The sampled view pairs (a, b) of every sample for one method (see module docstring)."""
    xr = _repeat(x, n_views)
    if method == "cl":
        return Views(xr + draw_xi(x, rngs["a"], n_views), xr + draw_xi(x, rngs["b"], n_views))
    if method == "cl_h":
        return Views(xr + draw_xi(x, rngs["a"], n_views), h.apply_rows(xr))
    if method == "mim":
        mask = draw_mask(x, rngs["mask"], n_views, p)
        return Views(xr * mask, xr * (1.0 - mask))
    raise ValueError(f"unknown method {method!r}; known: {METHODS}")


def augmentation_rngs(seed: int, d: int, client: int) -> dict[str, np.random.Generator]:
    """Fresh, independent augmentation streams for one (seed, d, client)."""
    return {
        "a": client_rng(seed, d, STREAM_VIEW_A, client),
        "b": client_rng(seed, d, STREAM_VIEW_B, client),
        "mask": client_rng(seed, d, STREAM_MASK, client),
    }


def sym(m: np.ndarray) -> np.ndarray:
    """Symmetric part (M + M^T) / 2."""
    return (m + m.T) / 2.0


def second_moment(x: np.ndarray) -> np.ndarray:
    """Empirical second moment S = (1/n) sum_j x_j x_j^T (the paper's 'empirical covariance')."""
    return x.T @ x / x.shape[0]


def views_matrix(views: Views) -> np.ndarray:
    """M = sym((1/R) sum_r b_r a_r^T) of sampled views (Eqs. 43 and 55 for one draw per sample)."""
    return sym(views.a.T @ views.b) / views.a.shape[0]


def expected_matrix(method: str, x: np.ndarray, *, p: float, h: HSpec, mim_form: str = "derived") -> np.ndarray:
    """M averaged over the augmentation distribution in closed form (docs/theory.md, 'Matrices X')."""
    s = second_moment(x)
    if method == "cl":
        return s  # E[xi] = E[xi'] = 0 and xi, xi' independent: E[(x+xi)(x+xi')^T] = x x^T
    if method == "cl_h":
        return sym(h.apply_rows(s).T)  # sym(H S): apply_rows(S) = S H^T, its transpose is H S
    if method == "mim":
        if mim_form == "paper_eq17":
            return 2.0 * p * (1.0 - p) * np.diag(np.diag(s))
        return p * (1.0 - p) * (s - np.diag(np.diag(s)))
    raise ValueError(f"unknown method {method!r}; known: {METHODS}")


def client_matrices(
    x: np.ndarray,
    methods: tuple[str, ...] | list[str],
    rngs: dict[str, np.random.Generator],
    *,
    modes: dict[str, str],
    p: float,
    h: HSpec,
    n_views: int = 1,
    mim_form: str = "derived",
) -> dict[str, np.ndarray]:
    """Every requested method's local matrix X_i for one client's data ``x`` (n x d).

    ``modes`` maps a method to "sampled" or "expected". Equal to :func:`views_matrix` of
    :func:`make_views` (same streams) but cheaper: cl and cl_h share the first view a = x + xi, and
    sym(a^T (x H^T)) = sym((a^T x) H^T) reuses the product a^T x.
    """
    out: dict[str, np.ndarray] = {}
    xr = _repeat(x, n_views)
    rows = xr.shape[0]
    shared_a = None
    for method in methods:
        mode = modes[method]
        _check_method(method, mode, mim_form)
        if mode == "expected" or (method == "mim" and mim_form == "paper_eq17"):
            out[method] = expected_matrix(method, x, p=p, h=h, mim_form=mim_form)
        elif method in ("cl", "cl_h"):
            if shared_a is None:
                a = xr + draw_xi(x, rngs["a"], n_views)
                shared_a = (a, a.T @ xr)
            a, ax = shared_a
            if method == "cl":
                out[method] = sym(ax + a.T @ draw_xi(x, rngs["b"], n_views)) / rows
            else:
                out[method] = sym(h.apply_rows(ax)) / rows
        else:
            out[method] = views_matrix(make_views("mim", x, rngs, p=p, h=h, n_views=n_views))
    return out


# --------------------------------------------------------------------------------------------------
# Objective values and gradients evaluated from the samples (for the gradient-descent cross-check)
# --------------------------------------------------------------------------------------------------
def regulariser(w: np.ndarray) -> float:
    """1/2 ||W^T W||_F^2, computed as 1/2 ||W W^T||_F^2 (same value, c x c instead of d x d)."""
    g = w @ w.T
    return 0.5 * float(np.sum(g * g))


def regulariser_grad(w: np.ndarray) -> np.ndarray:
    """Gradient of 1/2 ||W^T W||_F^2: 2 W W^T W (Eq. 13)."""
    return 2.0 * (w @ w.T) @ w


@dataclass
class ClientObjective:
    """One client's empirical objective L_i(W), evaluated directly from its samples and views.

    ``value``/``grad`` never form the d x d matrix (except for the printed Eq. 17 form, which is not
    derived from a sample-level loss), so comparing their minimiser with the top-c eigenspace of
    :meth:`matrix` checks the derivation of X, not just the eigen-solver.
    """

    method: str
    x: np.ndarray
    mode: str
    p: float
    h: HSpec
    mim_form: str = "derived"
    views: Views | None = None
    _hx: np.ndarray | None = field(default=None, repr=False)

    def matrix(self) -> np.ndarray:
        if self.views is not None:
            return views_matrix(self.views)
        return expected_matrix(self.method, self.x, p=self.p, h=self.h, mim_form=self.mim_form)

    def _h_x(self) -> np.ndarray:
        if self._hx is None:
            self._hx = self.h.apply_rows(self.x)
        return self._hx

    def alignment(self, w: np.ndarray) -> float:
        """-E[(W a)^T (W b)] (expectation over views in closed form when mode is "expected")."""
        n = self.x.shape[0]
        if self.views is not None:
            return -float(np.sum((self.views.a @ w.T) * (self.views.b @ w.T))) / self.views.a.shape[0]
        wx = self.x @ w.T
        if self.method == "cl":
            return -float(np.sum(wx * wx)) / n
        if self.method == "cl_h":
            return -float(np.sum(wx * (self._h_x() @ w.T))) / n
        col = np.mean(self.x**2, axis=0) @ np.sum(w * w, axis=0)  # sum_k E[x_k^2] ||W_{:,k}||^2
        if self.mim_form == "paper_eq17":
            return -2.0 * self.p * (1.0 - self.p) * float(col)
        return -self.p * (1.0 - self.p) * (float(np.sum(wx * wx)) / n - float(col))

    def alignment_grad(self, w: np.ndarray) -> np.ndarray:
        n = self.x.shape[0]
        if self.views is not None:
            a, b = self.views.a, self.views.b
            return -((w @ a.T) @ b + (w @ b.T) @ a) / a.shape[0]
        if self.method == "cl":
            return -2.0 * (w @ self.x.T) @ self.x / n
        if self.method == "cl_h":
            hx = self._h_x()
            return -((w @ self.x.T) @ hx + (w @ hx.T) @ self.x) / n
        col = np.mean(self.x**2, axis=0)
        if self.mim_form == "paper_eq17":
            return -4.0 * self.p * (1.0 - self.p) * w * col
        return -2.0 * self.p * (1.0 - self.p) * ((w @ self.x.T) @ self.x / n - w * col)

    def value(self, w: np.ndarray) -> float:
        return self.alignment(w) + regulariser(w)

    def grad(self, w: np.ndarray) -> np.ndarray:
        return self.alignment_grad(w) + regulariser_grad(w)


@dataclass
class WeightedObjective:
    """sum_j pi_j L_j(W) for a global objective of Eq. (1); value/grad sum the client terms."""

    objectives: list[ClientObjective]
    weights: np.ndarray

    def matrix(self) -> np.ndarray:
        return sum(float(wt) * obj.matrix() for wt, obj in zip(self.weights, self.objectives))

    def value(self, w: np.ndarray) -> float:
        return sum(float(wt) * obj.value(w) for wt, obj in zip(self.weights, self.objectives))

    def grad(self, w: np.ndarray) -> np.ndarray:
        return sum(float(wt) * obj.grad(w) for wt, obj in zip(self.weights, self.objectives))


def build_client_objective(
    method: str,
    x: np.ndarray,
    rngs: dict[str, np.random.Generator] | None,
    *,
    mode: str,
    p: float,
    h: HSpec,
    n_views: int = 1,
    mim_form: str = "derived",
) -> ClientObjective:
    """A :class:`ClientObjective`; in "sampled" mode its views come from ``rngs``."""
    _check_method(method, mode, mim_form)
    sampled = mode == "sampled" and not (method == "mim" and mim_form == "paper_eq17")
    views = make_views(method, x, rngs, p=p, h=h, n_views=n_views) if sampled else None
    return ClientObjective(method, x, mode, p, h, mim_form, views)


# --------------------------------------------------------------------------------------------------
# Global weights (Eq. 1)
# --------------------------------------------------------------------------------------------------
def validate_adjacency(adjacency: np.ndarray, name: str = "adjacency") -> np.ndarray:
    """A boolean, symmetric N x N adjacency without self loops (raises ValueError otherwise)."""
    adj = np.asarray(adjacency)
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {adj.shape}")
    adj = adj.astype(bool)
    if np.any(np.diag(adj)):
        raise ValueError(f"{name} has self loops; |A_i| adds the client itself, leave the diagonal False")
    if not np.array_equal(adj, adj.T):
        raise ValueError(f"{name} is not symmetric (the communication graph is undirected)")
    return adj


def closed_neighbourhoods(adjacency: np.ndarray) -> np.ndarray:
    """Boolean N x N matrix whose row i marks A_i = {i} plus i's neighbours (Assumption A.1)."""
    adj = validate_adjacency(adjacency)
    return adj | np.eye(adj.shape[0], dtype=bool)


def neighbourhood_weights(adjacency: np.ndarray) -> np.ndarray:
    """Omega with Omega_ij = 1/|A_i| for j in A_i: row i weights client i's neighbourhood objective."""
    closed = closed_neighbourhoods(adjacency).astype(float)
    return closed / closed.sum(axis=1, keepdims=True)


def decl_global_weights(adjacency: np.ndarray) -> np.ndarray:
    """pi_j = (1/N) sum_{i: j in A_i} 1/|A_i|, so that DecL's Eq. (1) objective is sum_j pi_j L_j.

    For a regular graph pi_j = 1/N for all j: the global DecL objective then equals FL's exactly.
    """
    return neighbourhood_weights(adjacency).mean(axis=0)


def global_weights(
    framework: str, n_clients: int, adjacency: np.ndarray | None = None, client: int = 0
) -> np.ndarray:
    """Weights pi over clients of the objective of ``framework`` (``local`` needs ``client``)."""
    if framework == "fl":
        return np.full(n_clients, 1.0 / n_clients)
    if framework == "decl":
        if adjacency is None:
            raise ValueError("framework 'decl' needs an adjacency matrix")
        weights = decl_global_weights(adjacency)
        if len(weights) != n_clients:
            raise ValueError(f"adjacency has {len(weights)} nodes but there are {n_clients} clients")
        return weights
    if framework == "local":
        weights = np.zeros(n_clients)
        weights[client] = 1.0
        return weights
    raise ValueError(f"unknown framework {framework!r}; known: {FRAMEWORKS}")


def combine(matrices: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """sum_j pi_j M_j for one weight vector (N,) -> (d, d), or a stack (m, N) -> (m, d, d)."""
    return np.tensordot(np.asarray(weights, dtype=float), matrices, axes=([-1], [0]))

"""Paper A's non-IID data model for the linear theory (Section 3.2, Fig. 1, appendix A.6).

N clients share 2N classes. Client i (1-based in the paper) holds mostly classes 2i-1 and 2i in equal
numbers, plus O(d^alpha) samples of one rare class h_i in [2N] \\ {2i-1, 2i}:

    class 2i-1:  x = +e_i - sum_{k<=N, k!=i} q_k tau e_k + mu xi
    class 2i:    x = -e_i - sum_{k<=N, k!=i} q_k tau e_k + mu xi
    rare h_i:    x = e_{h_i} + mu xi

with q_k ~ Unif{0, 1}, xi ~ N(0, I_d), tau = d^(1/5), mu = d^(-1/5) (Theorem 4.2). All clients hold the
same number of samples (Section 3.2); the frequent classes grow polynomially in d and the rare class
sub-linearly, |D_i| = Theta(d^beta) with beta >= 1 (proof of Theorem 4.2, after Eq. 24).

Indexing in this module is 0-based: client ``i`` owns classes ``2i`` and ``2i + 1`` and the signature
direction ``e_i``; the rare class ``h`` uses the direction ``e_h`` (``h < 2N <= c``), as printed.

Choices the paper leaves open (see docs/theory.md, "Data model"):
- ``q_mode``: the printed ``q^(2i-1,k)`` carries no sample index, but neither does ``xi``, which must be
  per sample; the default ``"sample"`` draws q afresh for every sample, ``"class"`` fixes one q per class.
- ``rare_assignment``: the paper only says ``h_i`` is not one of the client's own classes; ``"random"``
  (default) draws it uniformly from the allowed 2N - 2 classes with the data seed, ``"next"`` uses the
  first class of the next client (cyclic), ``"offset"`` the class ``N + ((i + 1) mod N)`` so that the rare
  directions cover e_{N+1..2N} once each (falls back to the next allowed class on a clash).
- ``rare_mode``: ``"basis"`` (default, as printed: x = e_{h_i} + mu xi) or ``"class"`` (draw the rare
  samples from class h_i's own generator).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

Q_MODES = ("sample", "class")
RARE_ASSIGNMENTS = ("random", "next", "offset")
RARE_MODES = ("basis", "class")

# Stream ids keep every random draw independent of which other quantities are computed.
_STREAM_RARE_ASSIGNMENT = 0
_STREAM_CLIENT_DATA = 1


@dataclass(frozen=True)
class SampleSizes:
    """Per-client sample counts: ``n_frequent`` per frequent class and ``n_rare`` of the rare class."""

    n_frequent: int
    n_rare: int

    @property
    def per_client(self) -> int:
        return 2 * self.n_frequent + self.n_rare


@dataclass
class ClientData:
    """One client's local dataset D_i: rows of ``x`` are samples, ``labels`` are 0-based classes."""

    client: int
    x: np.ndarray
    labels: np.ndarray
    rare_class: int


@dataclass
class TheoryDataset:
    """All clients' data for one (d, seed) draw, plus the parameters that produced it."""

    d: int
    n_clients: int
    seed: int
    tau: float
    mu: float
    sizes: SampleSizes
    clients: list[ClientData]
    options: dict = field(default_factory=dict)

    @property
    def rare_classes(self) -> np.ndarray:
        return np.array([c.rare_class for c in self.clients], dtype=np.int64)


def sample_sizes(
    d: int,
    n_frequent_factor: float = 1.0,
    beta: float = 1.0,
    n_rare_factor: float = 1.0,
    alpha: float = 0.5,
) -> SampleSizes:
    """Sample counts for dimension d: ``n_frequent = factor * d^beta`` and ``n_rare = factor * d^alpha``.

    The paper asks for frequent classes growing polynomially in d with |D_i| = Theta(d^beta), beta >= 1,
    and a rare class of size O(d^alpha), alpha in (0, 1) (Section 3.2; proof of Theorem 4.2).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1) (rare class is O(d^alpha)), got {alpha}")
    if beta < 1.0:
        raise ValueError(f"beta must be >= 1 (|D_i| = Theta(d^beta), beta >= 1), got {beta}")
    n_frequent = max(1, int(round(n_frequent_factor * d**beta)))
    n_rare = max(1, int(round(n_rare_factor * d**alpha)))
    return SampleSizes(n_frequent=n_frequent, n_rare=n_rare)


def default_tau_mu(d: int, tau_exponent: float = 0.2, mu_exponent: float = -0.2) -> tuple[float, float]:
    """tau = d^(1/5) and mu = d^(-1/5) as in Theorem 4.2 (exponents are parameters)."""
    return float(d**tau_exponent), float(d**mu_exponent)


def assign_rare_classes(n_clients: int, scheme: str, rng: np.random.Generator) -> np.ndarray:
    """The rare class h_i of every client, never one of its own classes {2i, 2i+1} (0-based)."""
    if scheme not in RARE_ASSIGNMENTS:
        raise ValueError(f"unknown rare_assignment {scheme!r}; known: {RARE_ASSIGNMENTS}")
    if n_clients < 2:
        raise ValueError("the data model needs at least 2 clients (h_i must be another client's class)")
    n_classes = 2 * n_clients
    rare = np.empty(n_clients, dtype=np.int64)
    for i in range(n_clients):
        own = {2 * i, 2 * i + 1}
        if scheme == "random":
            allowed = np.array([k for k in range(n_classes) if k not in own])
            rare[i] = allowed[rng.integers(len(allowed))]
        else:
            start = 2 * ((i + 1) % n_clients) if scheme == "next" else n_clients + (i + 1) % n_clients
            h = start
            while h in own:  # only "offset" can clash (tiny N); step to the next allowed class
                h = (h + 1) % n_classes
            rare[i] = h
    return rare


def _frequent_samples(
    client: int,
    sign: float,
    n: int,
    d: int,
    n_clients: int,
    tau: float,
    q_mode: str,
    rng: np.random.Generator,
) -> np.ndarray:
    """Noise-free part of class 2i-1 (sign=+1) or 2i (sign=-1): sign e_i - tau sum_{k!=i} q_k e_k."""
    others = np.array([k for k in range(n_clients) if k != client], dtype=np.int64)
    if q_mode == "sample":
        q = rng.integers(0, 2, size=(n, len(others)))
    else:
        q = np.broadcast_to(rng.integers(0, 2, size=(1, len(others))), (n, len(others)))
    x = np.zeros((n, d))
    x[:, client] = sign
    x[:, others] = -tau * q
    return x


def generate_client(
    client: int,
    d: int,
    n_clients: int,
    sizes: SampleSizes,
    rare_class: int,
    tau: float,
    mu: float,
    rng: np.random.Generator,
    q_mode: str = "sample",
    rare_mode: str = "basis",
) -> ClientData:
    """Draw client ``client``'s dataset D_i (Section 3.2): both frequent classes, then the rare class."""
    if q_mode not in Q_MODES:
        raise ValueError(f"unknown q_mode {q_mode!r}; known: {Q_MODES}")
    if rare_mode not in RARE_MODES:
        raise ValueError(f"unknown rare_mode {rare_mode!r}; known: {RARE_MODES}")
    parts = [
        _frequent_samples(client, +1.0, sizes.n_frequent, d, n_clients, tau, q_mode, rng),
        _frequent_samples(client, -1.0, sizes.n_frequent, d, n_clients, tau, q_mode, rng),
    ]
    if rare_mode == "basis":
        rare = np.zeros((sizes.n_rare, d))
        rare[:, rare_class] = 1.0
    else:
        owner, sign = rare_class // 2, (1.0 if rare_class % 2 == 0 else -1.0)
        rare = _frequent_samples(owner, sign, sizes.n_rare, d, n_clients, tau, q_mode, rng)
    parts.append(rare)
    x = np.concatenate(parts, axis=0)
    x += mu * rng.standard_normal(x.shape)
    labels = np.concatenate(
        [
            np.full(sizes.n_frequent, 2 * client),
            np.full(sizes.n_frequent, 2 * client + 1),
            np.full(sizes.n_rare, rare_class),
        ]
    ).astype(np.int64)
    return ClientData(client=client, x=x, labels=labels, rare_class=int(rare_class))


def client_rng(seed: int, d: int, stream: int, client: int) -> np.random.Generator:
    """A Generator for one (seed, d, purpose, client): draws never depend on evaluation order."""
    return np.random.default_rng([int(seed), int(d), int(stream), int(client)])


def generate_dataset(
    d: int,
    n_clients: int,
    seed: int,
    sizes: SampleSizes,
    *,
    tau: float | None = None,
    mu: float | None = None,
    q_mode: str = "sample",
    rare_assignment: str = "random",
    rare_mode: str = "basis",
) -> TheoryDataset:
    """All N local datasets for dimension d (Section 3.2), seeded with numpy Generators.

    ``tau``/``mu`` default to d^(1/5) and d^(-1/5) (Theorem 4.2). The same (d, seed) gives identical
    arrays; each client has its own stream, so client i's data do not depend on N's other clients.
    """
    if d < 2 * n_clients:
        raise ValueError(f"d={d} must be >= 2N={2 * n_clients} so every class direction e_1..e_2N exists")
    default_tau, default_mu = default_tau_mu(d)
    tau = default_tau if tau is None else float(tau)
    mu = default_mu if mu is None else float(mu)
    rare = assign_rare_classes(
        n_clients, rare_assignment, client_rng(seed, d, _STREAM_RARE_ASSIGNMENT, n_clients)
    )
    clients = [
        generate_client(
            i, d, n_clients, sizes, int(rare[i]), tau, mu,
            client_rng(seed, d, _STREAM_CLIENT_DATA, i), q_mode=q_mode, rare_mode=rare_mode,
        )
        for i in range(n_clients)
    ]
    options = {"q_mode": q_mode, "rare_assignment": rare_assignment, "rare_mode": rare_mode}
    return TheoryDataset(d, n_clients, int(seed), tau, mu, sizes, clients, options)


def population_second_moment(
    client: int, d: int, n_clients: int, tau: float, mu: float, rare_fraction: float, rare_class: int
) -> np.ndarray:
    """E[x x^T] on client i for q_mode="sample", rare_mode="basis" (what the empirical S_i estimates).

    Frequent part, for k, l in [N] \\ {i}: E[x_k^2] = tau^2/2, E[x_k x_l] = tau^2/4 (k != l); E[x_i^2] = 1;
    E[x_i x_k] = -/+ tau/2 cancels over the two equal-sized classes; + mu^2 I from the noise; the rare
    class adds rare_fraction * e_h e_h^T. Note this is not diagonal, unlike Eq. (18)/(44) of the paper.
    """
    m = np.zeros((d, d))
    others = np.array([k for k in range(n_clients) if k != client], dtype=np.int64)
    block = np.full((len(others), len(others)), tau**2 / 4.0)
    np.fill_diagonal(block, tau**2 / 2.0)
    m[np.ix_(others, others)] = block
    m[client, client] = 1.0
    m *= 1.0 - rare_fraction
    m[rare_class, rare_class] += rare_fraction
    m += mu**2 * np.eye(d)
    return m


def rare_fraction(sizes: SampleSizes) -> float:
    """Share of the rare class in a local dataset: n_rare / |D_i| (= Theta(d^(alpha - beta)))."""
    return sizes.n_rare / sizes.per_client


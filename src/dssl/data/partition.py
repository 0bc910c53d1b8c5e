"""Client partitions of a training set, their files, statistics and figure.

The schemes are declared in ``dssl.data.partition_specs`` (registry ``PARTITION_SCHEMES``, re-exported here
as ``PARTITIONERS``): each one's option keys, defaults and ranges, and the function of this module that
splits. Schemes (spec keys besides ``scheme``, ``clients`` and the pipeline's ``dataset`` / ``seed``):

- ``iid``: an even random split (client sizes within one; labels as the draw falls).
- ``dirichlet_balanced`` [alpha, sinkhorn_iters, rounding]: paper A's label non-IID (FedMAR/DecMAR,
  ICLR 2026, released code): per class a Dir(alpha) client-share vector, balanced by alternating column
  and row normalisation so that clients end up equal-sized. alpha = 1e5 (``IID_ALPHA``) is paper A's
  IID ("IID (alpha = 1e5)"), as its code draws it: every client holds close to 1/K of every class. The
  code stops after 100 rounds, which at alpha <= 0.01 leaves clients far from equal (and, in linear
  space, NaN for some draws); here the rounds run until every class is matched to half a sample, at
  most ``sinkhorn_iters`` (default 10000; 100 = the code's round count). The real-valued quotas
  M[k, c] * N become sample counts by ``rounding``: ``largest_remainder`` (default) assigns every
  sample -- each class exactly, each client floor or ceil of N / K -- rounding up the cells with the
  largest fractional parts that both margins allow (controlled rounding, solved as a min-cost flow in
  integer arithmetic); ``floor`` is the code's floor(M[k, c] * N), which leaves up to K - 1 samples
  of each class unassigned (19 of the embedded default's 1,347 at 10 clients).
- ``dirichlet_min_size`` [alpha, min_size]: the common per-class Dirichlet split (Hsu et al. 2019;
  FedMA's code), redrawn until every client holds at least ``min_size`` samples.
- ``k_classes`` [classes_per_client]: paper B's non-IID (FedEMA, ICLR 2022): every client holds
  ``classes_per_client`` whole classes, each class split evenly among the clients that hold it. When
  clients x classes_per_client < the number of classes, the classes no client is dealt are left out
  (``meta["unused_classes"]``): a client holds whole classes and none is dealt twice before every
  class is dealt once, so the rest cannot be placed without breaking the scheme.
- ``feature`` [augment]: paper A's feature non-IID: an even random split plus one fixed augmentation
  per client (see ``dssl.data.augment``).

Every partition assigns each sample to at most one client, and every scheme but ``k_classes`` (with fewer
class slots than classes) and ``dirichlet_balanced`` with ``rounding: floor`` assigns every one; the same
labels, spec and seed give the same partition bit for bit, on any machine: the Dirichlet schemes compute
real-valued shares with exp and log, whose last bits differ between CPUs (numpy's SIMD dispatch), so
every sample count derived from them is first snapped to a grid of 1e-6 samples (``_snapped_floor``) -- a
count changes only if a share lies within ~1e-13 of a grid midpoint, not whenever a share converges onto
an integer -- and floats written to ``partition.json`` are rounded (``dssl.artifacts.stable_floats``).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from dssl.artifacts import ArtifactError, read_json, require_file, stable_float, stable_floats
from dssl.data.partition_specs import PARTITION_SCHEMES, AugmentOptions, DirichletBalancedOptions, PartitionEntry
from dssl.specs import choices, option_defaults, option_keys

# Keys every partition spec may carry that are not scheme options (the pipeline's bookkeeping).
COMMON_KEYS = option_keys(PartitionEntry)
MIN_SIZE_MAX_DRAWS = 1000
# Sample counts from real-valued shares are taken on a grid of 1 / SNAP_GRID samples (see
# ``_snapped_floor``): far finer than a sample, far coarser than the ~1e-13 noise of exp/log.
SNAP_GRID = 10**6
IID_ALPHA = 1e5   # paper A's IID: "alpha = 1e5" of its balanced Dirichlet
ROUNDINGS: tuple[str, ...] = choices(DirichletBalancedOptions, "rounding")

# Paper A's released code's per-client augmentation ranges (``partition_specs.AugmentOptions``); only the
# brightness strength differs between clients.
AUGMENT_DEFAULTS: dict[str, Any] = option_defaults(AugmentOptions)
PARTITIONERS = PARTITION_SCHEMES   # the registry of schemes, under the name this module has always used


class PartitionError(ValueError):
    """A partition spec that cannot be satisfied; the message names the keys to change."""


@dataclass
class Partition:
    """Sorted int64 sample indices per client, optional per-client augmentation, and provenance."""

    client_indices: list[np.ndarray]
    client_augment: list[dict] | None
    scheme: str
    meta: dict = field(default_factory=dict)
    spec: dict = field(default_factory=dict)
    seed: int = 0

    @property
    def num_clients(self) -> int:
        return len(self.client_indices)

    def sizes(self) -> np.ndarray:
        return np.asarray([len(idx) for idx in self.client_indices], dtype=np.int64)


SchemeResult = tuple[list[np.ndarray], list[dict] | None, dict]


def resolve_options(scheme: str, spec: Mapping[str, Any]) -> dict:
    """The options of ``scheme`` a partition spec sets, with the scheme's defaults filled in; an unknown or a
    missing key is a ``PartitionError``."""
    defaults = PARTITION_SCHEMES[scheme].defaults()
    unknown = sorted(set(spec) - set(COMMON_KEYS) - set(defaults))
    if unknown:
        raise PartitionError(f"scheme '{scheme}': unknown key(s) {unknown}; "
                             f"accepted: {sorted(set(defaults) | {'clients'})}")
    resolved = {**defaults, **{k: v for k, v in spec.items() if k in defaults}}
    missing = sorted(k for k, v in resolved.items() if v is None)
    if missing:
        raise PartitionError(f"scheme '{scheme}': missing key(s) {missing}")
    return resolved


def create_partition(labels: np.ndarray, spec: Mapping[str, Any], seed: int) -> Partition:
    """Split the samples with ``labels`` among ``spec['clients']`` clients by ``spec['scheme']``."""
    labels = np.asarray(labels, dtype=np.int64)
    scheme = spec.get("scheme")
    if scheme not in PARTITION_SCHEMES:
        raise PartitionError(f"unknown scheme {scheme!r}; one of: {PARTITION_SCHEMES.names()}")
    options = resolve_options(scheme, spec)
    clients = int(spec.get("clients", 0))
    if not 1 <= clients <= len(labels):
        raise PartitionError(f"'clients' must be between 1 and the {len(labels)} samples, got {clients}")
    rng = np.random.default_rng(seed)
    parts, augment, meta = PARTITION_SCHEMES[scheme].split()(labels, clients, options, rng)
    indices = [np.sort(np.asarray(part, dtype=np.int64)) for part in parts]
    meta = {"unassigned": int(len(labels) - sum(len(p) for p in indices)), **meta}
    return Partition(indices, augment, scheme, meta, {**dict(spec), **options}, int(seed))


# --- random draws -------------------------------------------------------------------------------


def _log_gamma(rng: np.random.Generator, alpha: float, shape: tuple[int, ...]) -> np.ndarray:
    """log of Gamma(alpha, 1) variates, exact for any alpha > 0.

    Uses Gamma(a) = Gamma(a + 1) * U^(1/a) in log space: for the tiny alphas of paper A (down to 1e-3)
    the variates themselves underflow to 0, so a Dirichlet drawn in linear space has exact zeros or
    NaNs, which the normalisations below would turn into NaN rows.
    """
    return np.log(rng.standard_gamma(alpha + 1.0, size=shape)) + np.log1p(-rng.random(shape)) / alpha


def _dirichlet_among(rng: np.random.Generator, alpha: float, allowed: np.ndarray) -> np.ndarray:
    """A Dir(alpha) vector over the ``allowed`` entries (zeros elsewhere); never NaN, sums to 1."""
    logits = np.where(allowed, _log_gamma(rng, alpha, allowed.shape), -np.inf)
    return np.exp(logits - _logsumexp(logits, axis=0))


def _even_split(rng: np.random.Generator, n: int, clients: int) -> list[np.ndarray]:
    return np.array_split(rng.permutation(n), clients)


def _class_members(labels: np.ndarray) -> list[np.ndarray]:
    """Sample positions of each class 0..max(label), in ascending order (empty for absent classes)."""
    order = np.argsort(labels, kind="stable")
    return np.split(order, np.cumsum(np.bincount(labels))[:-1])


def _snapped_floor(samples: np.ndarray) -> np.ndarray:
    """floor(samples) as int64, after snapping to the grid 1 / SNAP_GRID.

    Converged shares often sit on an integer count (a whole class to one client is N_c - 1e-12
    samples); a plain floor would then depend on the last bits of exp/log. Snapping moves the
    decision boundaries to k - 0.5 / SNAP_GRID, where no share gathers.
    """
    return np.rint(np.asarray(samples, dtype=np.float64) * SNAP_GRID).astype(np.int64) // SNAP_GRID


def _alpha(options: dict) -> float:
    alpha = float(options["alpha"])
    if not alpha > 0:
        raise PartitionError(f"'alpha' must be > 0, got {alpha}")
    return alpha


# --- schemes --------------------------------------------------------------------------------------


def split_iid(labels: np.ndarray, clients: int, options: dict, rng: np.random.Generator) -> SchemeResult:
    return _even_split(rng, len(labels), clients), None, {}


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    top = x.max(axis=axis, keepdims=True)
    return top + np.log(np.exp(x - top).sum(axis=axis, keepdims=True))


def balance_shares(log_shares: np.ndarray, class_counts: np.ndarray,
                   max_iters: int) -> tuple[np.ndarray, int]:
    """Alternating column/row normalisation (Sinkhorn) of a clients x classes share matrix.

    Targets: column c sums to the class fraction N_c / N, every row to 1 / K, so that
    floor(M[k, c] * N) samples of class c per client (snapped, ``_snapped_floor``) use up each class
    and clients end up equal-sized. Paper A's code runs exactly 100 rounds (columns, then rows);
    here the rounds stop once every class is matched to half a sample, or after ``max_iters``.
    Returns (M, rounds run). Done in log space so entries far below the float range still take part.
    The stopping test is on the error snapped to 1e-6 samples, so the round count does not hinge on
    the last bits of exp.
    """
    n = class_counts.sum()
    present = class_counts > 0
    log_m = np.where(present, log_shares, -np.inf)
    log_cols = np.log(class_counts[present] / n)
    log_rows = -np.log(log_shares.shape[0])
    rounds = 0
    while rounds < max_iters:
        col = _logsumexp(log_m[:, present], axis=0)
        error = np.abs(np.exp(col.ravel()) * n - class_counts[present]).max()
        if rounds and np.rint(error * SNAP_GRID) < SNAP_GRID // 2:
            break
        log_m[:, present] += log_cols - col
        log_m += log_rows - _logsumexp(log_m, axis=1)
        rounds += 1
    return np.exp(log_m), rounds


def split_dirichlet_balanced(labels: np.ndarray, clients: int, options: dict,
                        rng: np.random.Generator) -> SchemeResult:
    members = _class_members(labels)
    counts = np.asarray([len(m) for m in members], dtype=np.float64)
    # Column scale of the Dirichlet draw is removed by the first column normalisation, so unnormalised
    # Gamma(alpha) variates give the same matrix as per-class Dir(alpha) vectors.
    log_shares = _log_gamma(rng, _alpha(options), (clients, len(members)))
    shares, rounds = balance_shares(log_shares, counts, int(options["sinkhorn_iters"]))
    rounding = _rounding(options)
    grid = np.rint(np.asarray(shares * len(labels), dtype=np.float64) * SNAP_GRID).astype(np.int64)
    quota = grid // SNAP_GRID if rounding == "floor" else largest_remainder(grid, counts.astype(np.int64))
    parts: list[list[np.ndarray]] = [[] for _ in range(clients)]
    for c, idx in enumerate(members):
        # The code slices each class in dataset order; shuffling first (seeded) keeps the slices
        # independent of file order (an image folder lists a class's files sorted by name).
        shuffled = rng.permutation(idx)
        # Contiguous slices per client in client order, clipped at the class size like the code's
        # slicing (quotas may overshoot a class while the balancing has not converged).
        ends = np.minimum(np.cumsum(quota[:, c]), len(idx))
        starts = np.concatenate([[0], ends[:-1]])
        for k in range(clients):
            parts[k].append(shuffled[starts[k]:ends[k]])
    column_error = np.abs(shares.sum(axis=0) * len(labels) - counts).max()
    # In samples, to 1e-6: the exp/log noise (~1e-13) is far below, so the written digits are stable.
    meta = {"sinkhorn_rounds": rounds, "max_class_quota_error": stable_float(column_error, decimals=6),
            "rounding": rounding}
    return [np.concatenate(p) for p in parts], None, meta


def _rounding(options: dict) -> str:
    rounding = options["rounding"]
    if rounding not in ROUNDINGS:
        raise PartitionError(f"'rounding' must be one of {', '.join(ROUNDINGS)}, got {rounding!r}")
    return str(rounding)


def largest_remainder(grid: np.ndarray, class_counts: np.ndarray) -> np.ndarray:
    """Integer sample counts [K, C] from real quotas given in units of 1 / SNAP_GRID samples: every class
    exactly (column c sums to N_c), every client floor(N / K) or ceil(N / K) samples, each cell its
    quota's floor or ceil. Among such roundings the one that rounds up the largest fractional parts
    (the two-margin form of Hamilton's largest-remainder method) is found as a min-cost flow: class c
    sends its N_c - sum_k floor(q_kc) leftover samples through cells (c, k) of positive remainder r_kc,
    each taking at most one, at cost SNAP_GRID - r_kc, to clients within their size range. A rounding
    of that kind exists whenever the quotas meet both margins (the fractional parts are a feasible
    flow, and a network's flows are integral); quotas the balancing left off their margins may also
    place samples outside their cells, at a higher cost. Integer arithmetic throughout: the same
    quotas give the same counts on any machine."""
    import networkx as nx

    floors, remainders = grid // SNAP_GRID, grid % SNAP_GRID
    clients, classes = floors.shape
    total = int(class_counts.sum())
    small, large = total // clients, -(-total // clients)
    _trim(floors, remainders, class_counts, axis=0)                           # no class over its size
    _trim(floors, remainders, np.full(clients, large), axis=1)               # no client over ceil(N / K)
    leftover = class_counts - floors.sum(axis=0)
    lower = np.maximum(small - floors.sum(axis=1), 0)
    upper = large - floors.sum(axis=1)
    flow_graph = nx.DiGraph()
    for c in range(classes):
        flow_graph.add_node(("class", c), demand=-int(leftover[c]))
    for k in range(clients):
        flow_graph.add_node(("client", k), demand=int(lower[k]))
        flow_graph.add_edge(("client", k), "sink", capacity=int(upper[k] - lower[k]), weight=0)
    flow_graph.add_node("sink", demand=int(leftover.sum() - lower.sum()))
    for c, k in zip(*np.nonzero(remainders.T > 0)):
        flow_graph.add_edge(("class", int(c)), ("client", int(k)), capacity=1,
                            weight=int(SNAP_GRID - remainders[k, c]))
    try:
        _, flow = nx.network_simplex(flow_graph)
    except nx.NetworkXUnfeasible:   # quotas off their margins: let samples leave their cells, at a premium
        for c in range(classes):
            for k in range(clients):
                if not flow_graph.has_edge(("class", c), ("client", k)):
                    flow_graph.add_edge(("class", c), ("client", k), capacity=int(leftover[c]),
                                        weight=int(2 * SNAP_GRID))
        _, flow = nx.network_simplex(flow_graph)
    counts = floors.copy()
    for c in range(classes):
        for (_, k), units in flow[("class", c)].items():
            counts[k, c] += units
    return counts


def _trim(floors: np.ndarray, remainders: np.ndarray, limits: np.ndarray, axis: int) -> None:
    """Lower floors along ``axis`` (0: per class, 1: per client) until each sum is within ``limits``, taking
    units from the cells of smallest remainder; only quotas that missed their margins need it."""
    sums = floors.sum(axis=axis)
    for line in np.flatnonzero(sums > limits):
        cells = floors[:, line] if axis == 0 else floors[line]
        rest = remainders[:, line] if axis == 0 else remainders[line]
        for cell in np.lexsort((np.arange(len(cells)), rest)):
            take = min(int(cells[cell]), int(sums[line] - limits[line]))
            cells[cell] -= take
            sums[line] -= take
            if sums[line] <= limits[line]:
                break


def split_dirichlet_min_size(labels: np.ndarray, clients: int, options: dict,
                        rng: np.random.Generator) -> SchemeResult:
    alpha, min_size = _alpha(options), int(options["min_size"])
    n = len(labels)
    if min_size * clients > n:
        raise PartitionError(f"min_size {min_size} x {clients} clients exceeds the {n} samples: "
                             "lower 'min_size' or 'clients'")
    members = _class_members(labels)
    for draw in range(1, MIN_SIZE_MAX_DRAWS + 1):
        parts = _min_size_draw(members, n, clients, alpha, rng)
        if min(len(p) for p in parts) >= min_size:
            return parts, None, {"draws": draw}
    raise PartitionError(
        f"no draw in {MIN_SIZE_MAX_DRAWS} gave every client >= {min_size} samples (alpha {alpha}, "
        f"{clients} clients, {n} samples): raise 'alpha', lower 'min_size' or use fewer 'clients'"
    )


def _min_size_draw(members: list[np.ndarray], n: int, clients: int, alpha: float,
                   rng: np.random.Generator) -> list[np.ndarray]:
    """One pass over the classes; a client already holding N/K samples gets no further share."""
    parts: list[list[np.ndarray]] = [[] for _ in range(clients)]
    sizes = np.zeros(clients, dtype=np.int64)
    for idx in members:
        shuffled = rng.permutation(idx)
        # Zeroing full clients and renormalising = a Dirichlet over the others (aggregation property);
        # some client is always below N/K because fewer than N samples are assigned so far.
        shares = _dirichlet_among(rng, alpha, sizes * clients < n)  # sizes < N/K, in integers
        # A client with a share of ~1e-12 ends at len - 1e-9: snapped, not truncated (see above).
        cuts = _snapped_floor(np.cumsum(shares) * len(shuffled))[:-1]
        for k, piece in enumerate(np.split(shuffled, cuts)):
            parts[k].append(piece)
            sizes[k] += len(piece)
    return [np.concatenate(p) for p in parts]


def split_k_classes(labels: np.ndarray, clients: int, options: dict, rng: np.random.Generator) -> SchemeResult:
    members = _class_members(labels)
    num_classes, per_client = len(members), int(options["classes_per_client"])
    if not 1 <= per_client <= num_classes:
        raise PartitionError(f"'classes_per_client' must be between 1 and the {num_classes} classes, "
                             f"got {per_client}")
    # Client k takes classes order[(k*l + j) mod C], j < l: distinct within a client, and every class
    # is held by floor or ceil(K*l / C) clients (balanced coverage).
    order = rng.permutation(num_classes)
    held = [[int(order[(k * per_client + j) % num_classes]) for j in range(per_client)]
            for k in range(clients)]
    holders: list[list[int]] = [[] for _ in range(num_classes)]
    for k, classes in enumerate(held):
        for c in classes:
            holders[c].append(k)
    parts: list[list[np.ndarray]] = [[] for _ in range(clients)]
    for c, idx in enumerate(members):
        if holders[c]:
            for k, piece in zip(holders[c], np.array_split(rng.permutation(idx), len(holders[c]))):
                parts[k].append(piece)
    meta = {"client_classes": [sorted(classes) for classes in held],
            "unused_classes": [c for c in range(num_classes) if not holders[c]]}
    return [np.concatenate(p) for p in parts], None, meta


def resolve_augment(augment: Mapping[str, Any] | None) -> dict:
    """Augmentation ranges with paper A's defaults filled in; an unknown key is a ``PartitionError``."""
    augment = dict(augment or {})
    unknown = sorted(set(augment) - set(AUGMENT_DEFAULTS))
    if unknown:
        raise PartitionError(f"augment: unknown key(s) {unknown}; accepted: {sorted(AUGMENT_DEFAULTS)}")
    return {**AUGMENT_DEFAULTS, **augment}


def split_feature(labels: np.ndarray, clients: int, options: dict, rng: np.random.Generator) -> SchemeResult:
    ranges = resolve_augment(options["augment"])
    parts = _even_split(rng, len(labels), clients)
    strengths = rng.random(clients)  # u_i ~ U(0, 1), drawn once per client
    augment = [
        {
            "brightness": stable_float(ranges["brightness_max"] * u),
            "brightness_p": float(ranges["brightness_p"]),
            "blur_kernel": int(ranges["blur_kernel"]),
            "blur_sigma": [float(s) for s in ranges["blur_sigma"]],
            "blur_p": float(ranges["blur_p"]),
            "flip_p": float(ranges["flip_p"]),
        }
        for u in strengths
    ]
    return parts, augment, {}


# --- files ----------------------------------------------------------------------------------------


def count_matrix(partition: Partition, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Samples per (client, class) as an int64 matrix [clients, classes]."""
    labels = np.asarray(labels, dtype=np.int64)
    return np.stack([np.bincount(labels[idx], minlength=num_classes) for idx in partition.client_indices])


def save_partition(partition: Partition, labels: np.ndarray, num_classes: int, out_dir: Path) -> np.ndarray:
    """Write ``partition.json`` and ``counts.csv`` (every client/class pair) with deterministic bytes;
    returns the count matrix."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = count_matrix(partition, labels, num_classes)
    document = {
        "scheme": partition.scheme,
        "seed": partition.seed,
        "spec": partition.spec,
        "meta": stable_floats(partition.meta),
        "num_samples": int(len(labels)),
        "num_classes": int(num_classes),
        "client_sizes": partition.sizes().tolist(),
        "client_indices": [idx.tolist() for idx in partition.client_indices],
        "client_augment": partition.client_augment,
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    (out_dir / "partition.json").write_text(text + "\n", encoding="utf-8")
    with open(out_dir / "counts.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["client", "class", "count"])
        for k, row in enumerate(counts):
            writer.writerows((k, c, int(n)) for c, n in enumerate(row))
    return counts


PARTITION_KEYS = {
    "scheme": str, "seed": int, "spec": dict, "meta": dict, "num_samples": int, "num_classes": int,
    "client_sizes": list, "client_indices": list, "client_augment": (list, type(None)),
}


def load_partition(path: Path) -> Partition:
    """Read a partition saved by ``save_partition`` (its folder or its ``partition.json``).

    A missing, truncated or inconsistent file is an ``ArtifactError`` naming it.
    """
    path = Path(path)
    if path.is_dir() or not path.suffix:
        path = path / "partition.json"
    document = read_json(path, PARTITION_KEYS)
    indices = [_client_indices(path, k, idx, document["num_samples"])
               for k, idx in enumerate(document["client_indices"])]
    if [len(idx) for idx in indices] != document["client_sizes"]:
        raise ArtifactError(path, "'client_sizes' do not match the lengths of 'client_indices'")
    augment = document["client_augment"]
    if augment is not None and (len(augment) != len(indices) or not all(isinstance(a, dict) for a in augment)):
        raise ArtifactError(path, f"'client_augment' should hold one object per client ({len(indices)})")
    return Partition(indices, augment, document["scheme"], document["meta"], document["spec"], document["seed"])


def _client_indices(path: Path, client: int, values: object, num_samples: int) -> np.ndarray:
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ArtifactError(path, f"'client_indices'[{client}] should be a list of sample indices")
    indices = np.asarray(values, dtype=np.int64)
    if len(indices) and (indices.min() < 0 or indices.max() >= num_samples):
        raise ArtifactError(path, f"'client_indices'[{client}] has indices outside 0..{num_samples - 1}")
    return indices


def load_counts(path: Path) -> np.ndarray:
    """The [clients, classes] int64 count matrix of a ``counts.csv`` (or its partition folder).

    Every (client, class) pair must appear once, as ``save_partition`` writes them; anything else is
    an ``ArtifactError`` naming the file.
    """
    path = Path(path)
    if path.is_dir() or not path.suffix:
        path = path / "counts.csv"
    rows = _count_rows(require_file(path))
    if not rows:
        raise ArtifactError(path, "holds no client/class rows")
    clients = 1 + max(client for client, _, _ in rows)
    classes = 1 + max(label for _, label, _ in rows)
    matrix = np.full((clients, classes), -1, dtype=np.int64)
    for client, label, count in rows:
        matrix[client, label] = count
    if len(rows) != clients * classes or (matrix < 0).any():
        raise ArtifactError(path, f"expected one row per (client, class) pair, {clients} x {classes}, "
                                  f"with counts >= 0")
    return matrix


def _count_rows(path: Path) -> list[tuple[int, int, int]]:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames != ["client", "class", "count"]:
                raise ArtifactError(path, f"expected the header client,class,count, found {reader.fieldnames}")
            rows = [(int(row["client"]), int(row["class"]), int(row["count"])) for row in reader]
    except (ValueError, TypeError, csv.Error, UnicodeDecodeError) as err:
        if isinstance(err, ArtifactError):
            raise
        raise ArtifactError(path, f"not a valid counts table, truncated or edited? ({err})") from err
    if any(client < 0 or label < 0 for client, label, _ in rows):
        raise ArtifactError(path, "negative client or class number")
    return rows


# --- statistics and figure ------------------------------------------------------------------------


def _as_matrix(counts: pd.DataFrame | np.ndarray) -> np.ndarray:
    if isinstance(counts, pd.DataFrame):
        table = counts.pivot_table(index="client", columns="class", values="count", aggfunc="sum",
                                   fill_value=0)
        return table.to_numpy(dtype=np.float64)
    return np.asarray(counts, dtype=np.float64)


def partition_stats(counts: pd.DataFrame | np.ndarray) -> dict[str, float]:
    """Skew statistics of a partition from its counts (``counts.csv`` as a DataFrame, or [K, C]).

    ``label_tv_*`` is the total-variation distance between a client's label distribution and the
    pooled one (0 = IID, 1 = disjoint); ``classes_present_*`` counts classes with >= 1 sample;
    ``effective_classes_mean`` is exp(entropy) of a client's label distribution.
    """
    matrix = _as_matrix(counts)
    sizes = matrix.sum(axis=1)
    nonempty = matrix[sizes > 0]
    client_dist = nonempty / nonempty.sum(axis=1, keepdims=True)
    global_dist = matrix.sum(axis=0) / matrix.sum()
    tv = 0.5 * np.abs(client_dist - global_dist).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(client_dist > 0, client_dist * np.log(client_dist), 0.0).sum(axis=1)
    present = (matrix > 0).sum(axis=1)
    return {
        "clients": float(len(matrix)),
        "empty_clients": float((sizes == 0).sum()),
        "samples_assigned": float(sizes.sum()),
        "client_size_min": float(sizes.min()),
        "client_size_max": float(sizes.max()),
        "client_size_mean": float(sizes.mean()),
        "client_size_cv": float(sizes.std() / sizes.mean()) if sizes.mean() > 0 else 0.0,
        "classes_present_mean": float(present.mean()),
        "classes_present_min": float(present.min()),
        "effective_classes_mean": float(np.exp(entropy).mean()),
        "label_tv_mean": float(tv.mean()),
        "label_tv_max": float(tv.max()),
        "class_coverage": float((matrix.sum(axis=0) > 0).mean()),
    }


def plot_partition_heatmap(counts_df: pd.DataFrame | np.ndarray, out_png: Path, title: str) -> None:
    """Seaborn heatmap of samples per client (rows) and class (columns), written as a PNG.

    Drawn on a standalone Agg figure (no pyplot state) with no software tag, so equal counts give
    equal bytes.
    """
    import seaborn as sns
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    matrix = _as_matrix(counts_df).astype(np.int64)
    clients, classes = matrix.shape
    figure = Figure(figsize=(min(2 + 0.35 * classes, 16), min(1.5 + 0.3 * clients, 16)), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    sns.heatmap(matrix, ax=axes, cmap="viridis", annot=clients * classes <= 400, fmt="d",
                annot_kws={"fontsize": 6}, cbar_kws={"label": "samples"})
    axes.set_xlabel("class")
    axes.set_ylabel("client")
    axes.set_title(title)
    figure.tight_layout()
    figure.savefig(out_png, format="png", metadata={"Software": None})

"""Partitions: every scheme is disjoint and seeded; scheme-specific shapes; files, stats, figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dssl.data.partition import (
    PARTITIONERS,
    Partition,
    PartitionError,
    balance_shares,
    count_matrix,
    create_partition,
    largest_remainder,
    load_partition,
    partition_stats,
    plot_partition_heatmap,
    save_partition,
)

# Unbalanced classes on purpose (sizes 60..105), shuffled like a real training split.
LABELS = np.random.default_rng(123).permutation(np.repeat(np.arange(10), np.arange(60, 110, 5)))

SPECS = {
    "iid": {"scheme": "iid", "clients": 7},
    "dirichlet_balanced": {"scheme": "dirichlet_balanced", "clients": 10, "alpha": 0.1},
    "dirichlet_min_size": {"scheme": "dirichlet_min_size", "clients": 10, "alpha": 0.5, "min_size": 20},
    "k_classes": {"scheme": "k_classes", "clients": 5, "classes_per_client": 2},
    "feature": {"scheme": "feature", "clients": 6},
}


def test_every_scheme_is_tested() -> None:
    assert set(SPECS) == set(PARTITIONERS)


def _check_disjoint(partition: Partition, n: int) -> np.ndarray:
    joined = np.concatenate(partition.client_indices)
    assert len(np.unique(joined)) == len(joined), "a sample is given to two clients"
    assert joined.min() >= 0 and joined.max() < n
    for idx in partition.client_indices:
        assert idx.dtype == np.int64 and np.all(np.diff(idx) > 0)
    return joined


@pytest.mark.parametrize("scheme", sorted(SPECS))
def test_disjoint_and_reproducible(scheme: str) -> None:
    spec = {**SPECS[scheme], "dataset": "digits", "seed": 3}
    first = create_partition(LABELS, spec, seed=3)
    joined = _check_disjoint(first, len(LABELS))
    assert first.num_clients == spec["clients"]
    assert first.meta["unassigned"] == len(LABELS) - len(joined)
    again = create_partition(LABELS, spec, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(first.client_indices, again.client_indices))
    assert first.client_augment == again.client_augment
    other = create_partition(LABELS, spec, seed=4)
    assert any(not np.array_equal(a, b) for a, b in zip(first.client_indices, other.client_indices))


def test_iid_is_an_even_cover() -> None:
    partition = create_partition(LABELS, SPECS["iid"], seed=0)
    assert len(_check_disjoint(partition, len(LABELS))) == len(LABELS)
    assert np.ptp(partition.sizes()) <= 1
    assert partition.client_augment is None


def test_balancing_matches_both_marginals() -> None:
    rng = np.random.default_rng(0)
    counts = np.array([50.0, 30.0, 0.0, 20.0])
    shares, rounds = balance_shares(np.log(rng.gamma(0.5, size=(5, 4))), counts, 1000)
    assert rounds < 1000
    assert np.allclose(shares.sum(axis=1), 1 / 5)
    assert np.abs(shares.sum(axis=0) * 100 - counts).max() < 0.5
    assert np.all(shares[:, 2] == 0)


@pytest.mark.parametrize("alpha", [1e5, 1.0, 0.1, 0.01, 0.001])
@pytest.mark.parametrize("clients", [4, 10, 40])
def test_dirichlet_balanced_any_alpha_gives_near_equal_clients(alpha: float, clients: int) -> None:
    spec = {"scheme": "dirichlet_balanced", "clients": clients, "alpha": alpha}
    partition = create_partition(LABELS, spec, seed=0)
    _check_disjoint(partition, len(LABELS))
    assert np.ptp(partition.sizes()) <= 1   # largest-remainder rounding: sizes within one, nothing dropped
    assert partition.meta["unassigned"] == 0
    code = create_partition(LABELS, {**spec, "rounding": "floor"}, seed=0)
    _check_disjoint(code, len(LABELS))
    # the code's floor() per (client, class) cell loses < 1 sample per cell: at most one per class per client
    assert code.sizes().max() <= len(LABELS) / clients + 1
    assert 0 <= code.meta["unassigned"] <= clients * 10


def test_largest_remainder_by_hand() -> None:
    """3 clients x 3 classes of 2 samples, every quota row and column summing to 2. Rounding each class on
    its own by largest remainder would give client 1 three samples (0.6, 0.6, 0.8); the two-margin rounding
    keeps every client at 2 and, among those roundings, rounds up the largest remainders (total 3.7)."""
    quotas = np.array([[0.9, 0.9, 0.2], [0.6, 0.6, 0.8], [0.5, 0.5, 1.0]])
    counts = largest_remainder(np.rint(quotas * 10**6).astype(np.int64), np.array([2, 2, 2]))
    assert counts.sum(axis=0).tolist() == [2, 2, 2] and counts.sum(axis=1).tolist() == [2, 2, 2]
    assert counts[0].tolist() == [1, 1, 0] and counts[:, 2].tolist() == [0, 1, 1]
    assert counts[1, :2].sum() == counts[2, :2].sum() == 1
    assert ((counts - np.floor(quotas)) * (quotas - np.floor(quotas))).sum() == pytest.approx(3.7)
    # 2 clients: 5 samples of one class, quotas 2.6 / 2.4 -> sizes 3 / 2 by the larger remainder
    assert largest_remainder(np.array([[2_600_000], [2_400_000]]), np.array([5])).ravel().tolist() == [3, 2]


def test_the_codes_iid_alpha_gives_each_client_its_share_of_every_class() -> None:
    spec = {"scheme": "dirichlet_balanced", "clients": 7, "alpha": 1e5}
    counts = count_matrix(create_partition(LABELS, spec, seed=0), LABELS, 10)
    share = np.bincount(LABELS) / 7
    assert np.all(np.abs(counts - share) < 1)   # floor or ceil of N_c / K per class and client
    random_split = count_matrix(create_partition(LABELS, SPECS["iid"], seed=0), LABELS, 10)
    assert np.abs(random_split - share).max() > 2


@pytest.mark.parametrize("name, spec", [
    *SPECS.items(),
    ("dirichlet_balanced-iid", {"scheme": "dirichlet_balanced", "clients": 10, "alpha": 1e5}),
    ("dirichlet_balanced-skewed", {"scheme": "dirichlet_balanced", "clients": 20, "alpha": 0.001}),
    ("k_classes-all-dealt-twice", {"scheme": "k_classes", "clients": 5, "classes_per_client": 4}),
])
def test_every_partition_holds_each_training_index_exactly_once(name: str, spec: dict) -> None:
    partition = create_partition(LABELS, spec, seed=1)
    joined = np.sort(np.concatenate(partition.client_indices))
    assert np.array_equal(joined, np.arange(len(LABELS))), name
    assert partition.meta["unassigned"] == 0


def test_k_classes_leaves_out_only_the_classes_no_client_is_dealt() -> None:
    partition = create_partition(LABELS, {"scheme": "k_classes", "clients": 3, "classes_per_client": 2}, seed=0)
    unused = partition.meta["unused_classes"]
    assert len(unused) == 4
    joined = np.sort(np.concatenate(partition.client_indices))
    assert np.array_equal(joined, np.flatnonzero(~np.isin(LABELS, unused)))


def test_dirichlet_balanced_alpha_orders_the_skew() -> None:
    def tv(alpha: float) -> float:
        spec = {"scheme": "dirichlet_balanced", "clients": 10, "alpha": alpha}
        partition = create_partition(LABELS, spec, 0)
        return partition_stats(count_matrix(partition, LABELS, 10))["label_tv_mean"]

    assert tv(1e5) < 0.02 < tv(1.0) < tv(0.1) < tv(0.001)
    assert tv(0.001) > 0.7


def test_dirichlet_balanced_code_round_count_is_an_option() -> None:
    spec = {"scheme": "dirichlet_balanced", "clients": 10, "alpha": 0.001, "sinkhorn_iters": 100}
    partition = create_partition(LABELS, spec, seed=0)
    assert partition.meta["sinkhorn_rounds"] <= 100
    _check_disjoint(partition, len(LABELS))


def test_dirichlet_min_size_reaches_the_minimum() -> None:
    partition = create_partition(LABELS, {**SPECS["dirichlet_min_size"], "alpha": 0.05}, seed=0)
    assert len(_check_disjoint(partition, len(LABELS))) == len(LABELS)
    assert partition.sizes().min() >= 20
    assert partition.meta["draws"] >= 1


def test_dirichlet_min_size_default_and_tiny_alpha() -> None:
    spec = {"scheme": "dirichlet_min_size", "clients": 5, "alpha": 0.001}
    partition = create_partition(LABELS, spec, seed=0)
    assert partition.spec["min_size"] == 10 and partition.sizes().min() >= 10


def test_dirichlet_min_size_impossible_is_a_clear_error() -> None:
    with pytest.raises(PartitionError, match="lower 'min_size' or 'clients'"):
        create_partition(LABELS, {**SPECS["dirichlet_min_size"], "min_size": 100}, seed=0)
    with pytest.raises(PartitionError, match="raise 'alpha', lower 'min_size'"):
        create_partition(LABELS, {**SPECS["dirichlet_min_size"], "alpha": 0.001, "min_size": 80}, seed=0)


@pytest.mark.parametrize("clients, per_client", [(5, 2), (10, 3), (3, 2), (20, 1)])
def test_k_classes(clients: int, per_client: int) -> None:
    spec = {"scheme": "k_classes", "clients": clients, "classes_per_client": per_client}
    partition = create_partition(LABELS, spec, seed=1)
    _check_disjoint(partition, len(LABELS))
    counts = count_matrix(partition, LABELS, 10)
    assert np.all((counts > 0).sum(axis=1) == per_client)
    holders = (counts > 0).sum(axis=0)
    used = holders > 0
    assert np.ptp(holders[used]) <= 1 and used.sum() == min(10, clients * per_client)
    for c in np.flatnonzero(used):
        shares = counts[counts[:, c] > 0, c]
        assert shares.sum() == (LABELS == c).sum() and np.ptp(shares) <= 1
    assert partition.meta["client_classes"] == [sorted(np.flatnonzero(row).tolist()) for row in counts]


def test_k_classes_too_many_classes() -> None:
    with pytest.raises(PartitionError, match="classes_per_client"):
        create_partition(LABELS, {"scheme": "k_classes", "clients": 2, "classes_per_client": 11}, seed=0)


def test_feature_augmentation_per_client() -> None:
    partition = create_partition(LABELS, SPECS["feature"], seed=0)
    assert np.ptp(partition.sizes()) <= 1
    assert len(partition.client_augment) == 6
    strengths = [aug["brightness"] for aug in partition.client_augment]
    assert all(0 <= s <= 0.5 for s in strengths) and len(set(strengths)) == 6
    assert partition.client_augment[0] | {"brightness": 0} == {
        "brightness": 0, "brightness_p": 0.8, "blur_kernel": 5, "blur_sigma": [0.1, 2.0], "blur_p": 0.5,
        "flip_p": 0.5,
    }
    augment = {"brightness_max": 0.2, "flip_p": 0.0}
    custom = create_partition(LABELS, {**SPECS["feature"], "augment": augment}, 0)
    assert all(aug["brightness"] <= 0.2 and aug["flip_p"] == 0.0 for aug in custom.client_augment)
    with pytest.raises(PartitionError, match="augment: unknown"):
        create_partition(LABELS, {**SPECS["feature"], "augment": {"contrast": 0.3}}, 0)


@pytest.mark.parametrize("spec, problem", [
    ({"scheme": "shards", "clients": 3}, "unknown scheme"),
    ({"scheme": "iid", "clients": 3, "alpha": 1}, "unknown key"),
    ({"scheme": "dirichlet_balanced", "clients": 3}, "missing key"),
    ({"scheme": "iid", "clients": 0}, "'clients'"),
    ({"scheme": "iid"}, "'clients'"),
])
def test_bad_specs(spec: dict, problem: str) -> None:
    with pytest.raises(PartitionError, match=problem):
        create_partition(LABELS, spec, seed=0)


# --- files, statistics, figure --------------------------------------------------------------------


def test_save_load_roundtrip_and_deterministic_bytes(tmp_path: Path) -> None:
    partition = create_partition(LABELS, {**SPECS["feature"], "dataset": "digits", "seed": 0}, seed=0)
    save_partition(partition, LABELS, 10, tmp_path / "a")
    save_partition(create_partition(LABELS, SPECS["feature"] | {"dataset": "digits", "seed": 0}, 0),
                   LABELS, 10, tmp_path / "b")
    for name in ("partition.json", "counts.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    loaded = load_partition(tmp_path / "a")
    assert loaded.scheme == "feature" and loaded.client_augment == partition.client_augment
    assert all(np.array_equal(a, b) and b.dtype == np.int64
               for a, b in zip(partition.client_indices, loaded.client_indices))
    document = json.loads((tmp_path / "a" / "partition.json").read_text())
    assert document["spec"]["dataset"] == "digits" and document["num_samples"] == len(LABELS)
    assert load_partition(tmp_path / "a" / "partition.json").seed == 0


def test_counts_csv_lists_every_pair(tmp_path: Path) -> None:
    partition = create_partition(LABELS, SPECS["k_classes"], seed=0)
    matrix = save_partition(partition, LABELS, 12, tmp_path)
    counts = pd.read_csv(tmp_path / "counts.csv")
    assert list(counts.columns) == ["client", "class", "count"]
    assert len(counts) == 5 * 12 and (counts["count"] == 0).sum() == 5 * 12 - 10
    assert counts.groupby("client")["count"].sum().tolist() == partition.sizes().tolist()
    assert np.array_equal(counts["count"].to_numpy().reshape(5, 12), matrix)


def test_stats_on_a_hand_case() -> None:
    counts = np.array([[10, 0], [0, 10]])
    stats = partition_stats(counts)
    assert stats["label_tv_mean"] == pytest.approx(0.5)
    assert stats["client_size_cv"] == 0 and stats["classes_present_mean"] == 1
    assert stats["effective_classes_mean"] == pytest.approx(1.0)
    uniform = partition_stats(np.array([[5, 5], [5, 5], [0, 0]]))
    assert uniform["label_tv_mean"] == 0 and uniform["empty_clients"] == 1
    assert uniform["effective_classes_mean"] == pytest.approx(2.0)
    long = pd.DataFrame({"client": [0, 0, 1, 1], "class": [0, 1, 0, 1], "count": [10, 0, 0, 10]})
    assert partition_stats(long) == stats


def test_heatmap_is_deterministic(tmp_path: Path) -> None:
    partition = create_partition(LABELS, SPECS["dirichlet_balanced"], seed=0)
    save_partition(partition, LABELS, 10, tmp_path)
    counts = pd.read_csv(tmp_path / "counts.csv")
    plot_partition_heatmap(counts, tmp_path / "a.png", "dirichlet_balanced alpha 0.1")
    plot_partition_heatmap(counts, tmp_path / "b.png", "dirichlet_balanced alpha 0.1")
    data = (tmp_path / "a.png").read_bytes()
    assert data.startswith(b"\x89PNG") and data == (tmp_path / "b.png").read_bytes()

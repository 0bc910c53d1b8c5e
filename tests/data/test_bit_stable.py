"""Bit-stable artifacts: the CI profile's prepared data, partitions and graphs have pinned md5s, and
last-bit noise in exp/log/eigenvalues (which differs between CPUs) does not change a byte of them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from dssl.config.params import load_params
from dssl.data import partition as partition_module
from dssl.data.partition import create_partition, save_partition

REPO = Path(__file__).resolve().parents[2]
CI_PARAMS = REPO / "configs" / "ci.yaml"

# md5 of every data file the prepare, partition, graph and graph_improve stages write for
# configs/ci.yaml (figures are not pinned). A change here means every machine's outputs change:
# only update these together with the code change that explains it.
EXPECTED_MD5 = {
    "data/prepared/digits/meta.json": "b9ccf5ee88bd716279d79aec6abab69d",
    "data/prepared/digits/train.npz": "27d3a7a4121f1edb6e4ec6d447895a2d",
    "data/prepared/digits/test.npz": "8956a4a171356f86abf96d56c87b8086",
    "data/partitions/fl-iid/partition.json": "5846f2f4ee5aabcfc7d4b86cca38c5db",
    "data/partitions/fl-iid/counts.csv": "ca2ceaf2ec74fa5c2b5ebd0d39fc2613",
    "data/partitions/fl-label/partition.json": "e821be4ddcf59de46282c838118b0d74",
    "data/partitions/fl-label/counts.csv": "0041edb1a5d4828b063bf7707867c941",
    "data/partitions/fl-feature/partition.json": "ebea9d5f9cfcc3b19c1f652552f8ce40",
    "data/partitions/fl-feature/counts.csv": "ca2ceaf2ec74fa5c2b5ebd0d39fc2613",
    "data/partitions/decl-label/partition.json": "1e67dfdedb873f59b2588277438ae189",
    "data/partitions/decl-label/counts.csv": "6ddc5585d6d1fc0708df7e7aeaa6e063",
    "data/graphs/uniform-3/graph.json": "dcec31ae1ae3ac537f1274aa6aed48d5",
    "data/graphs/general-3/graph.json": "c2c8f1c465360ac165b359d138f1d2fe",
    "data/graphs/complete/graph.json": "95bb563fd95d9b70d04c9275c5ad9c0f",
    "data/graphs/general-3-plus2/graph.json": "96caf1a081ecdc3b69fef8681fa75a1b",
}


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def run_ci_stages(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Run the stage functions of every prepare/partition/graph entry of configs/ci.yaml in ``root``
    (the stages' own code writes the files) without MLflow logging or figure drawing; md5 per file."""
    from dssl.pipeline import graph, graph_improve, partition, prepare
    from dssl.pipeline.common import Stage

    monkeypatch.chdir(root)
    for method in ("log", "log_runs"):  # no MLflow: only the written files matter here
        if hasattr(Stage, method):
            monkeypatch.setattr(Stage, method, lambda self, *args, **kwargs: "no-tracking")
    monkeypatch.setattr(partition_module, "plot_partition_heatmap", lambda counts, out, title: Path(out).touch())
    import dssl.reporting.graph_figure as graph_figure

    monkeypatch.setattr(graph_figure, "plot_graph", lambda g, out, title: Path(out).touch())
    params = load_params(CI_PARAMS)
    for name in params["datasets"]:
        prepare.run(name, CI_PARAMS)
    partition.run(CI_PARAMS)
    graph.run(CI_PARAMS)
    for name in params.get("improved_graphs") or {}:
        graph_improve.run(name, CI_PARAMS)
    return {rel: md5(root / rel) for rel in EXPECTED_MD5 if (root / rel).is_file()}


def test_ci_data_files_have_the_pinned_md5s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = run_ci_stages(tmp_path, monkeypatch)
    data_files = {p.relative_to(tmp_path).as_posix() for p in (tmp_path / "data").rglob("*") if p.is_file()}
    assert data_files == set(EXPECTED_MD5), "a stage writes a data file that is not pinned, or no longer one"
    assert written == EXPECTED_MD5


# --- last-bit noise ---------------------------------------------------------------------------------


def _noisy(function, seed: int):
    """``function`` with every float result moved by -2..+2 units in the last place, like another CPU's
    SIMD exp/log or another LAPACK build."""
    rng = np.random.default_rng(seed)

    def wrapped(*args, **kwargs):
        out = function(*args, **kwargs)
        array = np.asarray(out)
        if array.dtype.kind not in "fc":
            return out
        steps = rng.integers(-2, 3, size=array.shape)
        noisy = array * (1 + steps * np.finfo(np.float64).eps)
        return noisy if isinstance(out, np.ndarray) else noisy.dtype.type(noisy)

    return wrapped


def _add_float_noise(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    for name in ("exp", "log", "log1p"):
        monkeypatch.setattr(np, name, _noisy(getattr(np, name), seed))
    for name in ("eigvals", "eigvalsh"):
        monkeypatch.setattr(np.linalg, name, _noisy(getattr(np.linalg, name), seed))
    draw = partition_module._log_gamma
    monkeypatch.setattr(partition_module, "_log_gamma", lambda *args: draw(*args) * (1 + 1e-15))


def partition_bytes(labels: np.ndarray, spec: dict, tmp: Path) -> bytes:
    part = create_partition(labels, spec, int(spec.get("seed", 0)))
    save_partition(part, labels, int(labels.max()) + 1, tmp)
    return (tmp / "partition.json").read_bytes() + (tmp / "counts.csv").read_bytes()


# Unbalanced classes (60..105, all multiples of 5), shuffled.
LABELS = np.random.default_rng(123).permutation(np.repeat(np.arange(10), np.arange(60, 110, 5)))
NOISE_SPECS = {
    # one client: every share is a whole class, N_c - 1e-14 in floats; a plain floor dropped a sample
    "balanced-one-client": {"scheme": "dirichlet_balanced", "clients": 1, "alpha": 0.1},
    # the code's IID (alpha = 1e5) with 5 | N_c: shares converge onto N_c / 5 exactly
    "balanced-iid-divisible": {"scheme": "dirichlet_balanced", "clients": 5, "alpha": 1e5},
    "balanced-skewed": {"scheme": "dirichlet_balanced", "clients": 10, "alpha": 0.01},
    "balanced-moderate": {"scheme": "dirichlet_balanced", "clients": 7, "alpha": 0.5},
    "min-size": {"scheme": "dirichlet_min_size", "clients": 6, "alpha": 0.05, "min_size": 10},
}


@pytest.mark.parametrize("name", sorted(NOISE_SPECS))
@pytest.mark.parametrize("noise_seed", [0, 1, 2])
def test_partition_ignores_last_bit_noise(name: str, noise_seed: int, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {**NOISE_SPECS[name], "seed": 0}
    clean = partition_bytes(LABELS, spec, tmp_path / "clean")
    _add_float_noise(monkeypatch, noise_seed)
    assert partition_bytes(LABELS, spec, tmp_path / "noisy") == clean


def test_one_client_balanced_partition_uses_every_sample() -> None:
    """Paper A's balancing uses each class up; with one client that is every sample."""
    part = create_partition(LABELS, {"scheme": "dirichlet_balanced", "clients": 1, "alpha": 0.1}, 0)
    assert part.meta["unassigned"] == 0 and part.sizes().tolist() == [len(LABELS)]


def test_ci_label_partitions_and_graphs_ignore_last_bit_noise(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The stages of configs/ci.yaml, re-run with noisy exp/log/eigenvalues, write the pinned bytes."""
    _add_float_noise(monkeypatch, seed=7)
    assert run_ci_stages(tmp_path, monkeypatch) == EXPECTED_MD5


def test_snapped_floor_is_a_floor_off_the_grid() -> None:
    snapped = partition_module._snapped_floor
    values = np.array([0.0, 0.4, 1.0 - 1e-12, 1.0 + 1e-12, 2.999999, 7.5, -0.3])
    assert snapped(values).tolist() == [0, 0, 1, 1, 2, 7, -1]
    assert snapped(values).dtype == np.int64


def test_counts_from_written_fractions_are_exact() -> None:
    """Counts derived from a fraction in params.yaml use the decimal as written, not its float."""
    from dssl.data.splits import _test_count
    from dssl.topology.topology_specs import edge_count_for

    assert 0.28 * 25 > 7 and _test_count(25, 0.28) == 7  # the float product is 7.000000000000001
    assert _test_count(1797, 0.25) == 450  # the CI/default digits split, as before
    assert 10 * (4.1 - 1) / 2 < 15.5 and edge_count_for(10, 4.1) == 16  # exactly 15.5: half to even
    assert edge_count_for(6, 3) == 6

"""Stage features (paper A's Fig. 3): which encoders it reads, the test subset, the 2-D embedding, and the
params section's checks. The stage itself runs end to end in tests/pipeline/test_pipeline_e2e.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dssl.artifacts import ArtifactError
from dssl.config.params import read_params, validate
from dssl.pipeline.catalogue import producer
from dssl.pipeline.features import GLOBAL, _test_subset, embed, encoder_files

from conftest import REPO


def test_a_missing_encoder_is_an_artifact_error_on_its_path(tmp_path, monkeypatch):
    """The stage names the missing file; ``dssl features`` adds the command that writes it (its producer in
    the catalogue, run as printed: tests/faults/test_recovery_messages.py)."""
    monkeypatch.chdir(tmp_path)
    params = read_params(REPO / "params.yaml")
    with pytest.raises(ArtifactError) as local:
        encoder_files(params, "mae-vit", "fl-label", "fedmar", [0, 9], seed=0)
    assert local.value.path == Path("models/local/mae-vit/fl-label/seed-0/client-0/encoder.pt")
    assert producer(params, local.value.path).name == "pretrain_local@mae-vit-fl-label"
    for folder in ("models/local/mae-vit/fl-label/seed-0/client-0", "models/local/mae-vit/fl-label/seed-0/client-9"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "encoder.pt").write_bytes(b"")
    with pytest.raises(ArtifactError) as global_:
        encoder_files(params, "mae-vit", "fl-label", "fedmar", [0, 9], seed=0)
    assert producer(params, global_.value.path).name == "pretrain_fl@mae-vit-fl-label-fedmar"
    (tmp_path / "models/fl/mae-vit/fl-label/fedmar/seed-0").mkdir(parents=True)
    (tmp_path / "models/fl/mae-vit/fl-label/fedmar/seed-0/encoder.pt").write_bytes(b"")
    assert list(encoder_files(params, "mae-vit", "fl-label", "fedmar", [0, 9], seed=0)) == ["local 1", "local 10",
                                                                                          GLOBAL]


def test_the_test_subset_is_stratified_and_the_embedding_two_dimensional():
    labels = np.repeat(np.arange(5), 40)
    subset = _test_subset(labels, 50, seed=0)
    assert len(subset) == 50 and set(np.bincount(labels[subset])) == {10}
    assert len(_test_subset(labels, 1000, seed=0)) == 200 and len(_test_subset(labels, None, seed=0)) == 200
    rng = np.random.default_rng(0)
    features = np.concatenate([rng.normal(3 * c, 0.3, size=(20, 32)) for c in range(3)])
    xy = embed(features, seed=0)
    assert xy.shape == (60, 2)
    assert np.array_equal(xy, embed(features, seed=0))   # seeded: the same figure every run
    centres = np.stack([xy[20 * c:20 * (c + 1)].mean(axis=0) for c in range(3)])
    spread = max(xy[20 * c:20 * (c + 1)].std(axis=0).max() for c in range(3))
    assert min(np.linalg.norm(centres[a] - centres[b]) for a in range(3) for b in range(a + 1, 3)) > 2 * spread


def test_the_features_section_is_checked_against_seeds_datasets_and_the_stand_alone_clients():
    params = read_params(REPO / "params.yaml")
    assert validate(params, REPO) == []   # the repository: the verdict records params.yaml lists are there
    params["features"].update({"seed": 7, "dataset": "cifar10", "images": 3, "clients": [0, 5]})
    params["features"]["grids"]["extra"] = {"models": ["byol-cnn"], "partitions": ["fl-label"],
                                            "strategies": ["fedavg"]}
    problems = {p.path: p.message for p in validate(params, REPO)}
    assert problems["features.seed"] == ("7 is not one of the seeds [0, 1, 2] that "
                                         "simsiam-cnn / fl-label / fedavg trains")
    assert "'cifar10' is not defined in 'datasets'" in problems["features.dataset"]
    assert "features.images" in problems
    assert "does not train [5]" in problems["features.clients"]
    assert problems["features"] == "cell byol-cnn / fl-label / fedavg is not an FL cell of pretrain.fl.grids"

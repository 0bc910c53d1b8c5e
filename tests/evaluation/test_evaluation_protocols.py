"""Linear probe and fine-tuning on tiny synthetic image sets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from evaluation_helpers import FlattenEncoder, separable_images

from dssl.config.protocols import PROTOCOL_SPECS
from dssl.evaluation import evaluate, stratified_split
from dssl.models.backbones import create_backbone


pytestmark = pytest.mark.usefixtures("single_thread")


def test_stratified_split_is_disjoint_seeded_and_per_class():
    labels = np.repeat(np.arange(4), [10, 20, 2, 1])
    fit, val = stratified_split(labels, 0.2, seed=0)
    assert np.intersect1d(fit, val).size == 0
    assert np.array_equal(np.union1d(fit, val), np.arange(len(labels)))
    assert [int((labels[val] == c).sum()) for c in range(4)] == [2, 4, 1, 0]  # a singleton stays in fit
    again, _ = stratified_split(labels, 0.2, seed=0)
    other, _ = stratified_split(labels, 0.2, seed=1)
    assert np.array_equal(fit, again) and not np.array_equal(fit, other)


def test_linear_probe_separates_separable_features_and_reads_test_once():
    train, test = separable_images(300, seed=0), separable_images(90, seed=1)
    config = {"epochs": 30, "eval_every": 5, "lr_grid": [1e-2, 3e-2], "weight_decay_grid": [0.0]}
    result = evaluate("linear_probe", FlattenEncoder(16), train, test, config, seed=0)
    assert result["test_acc"] >= 0.95 and result["val_acc"] >= 0.95
    assert result["lr"] in (1e-2, 3e-2) and 1 <= result["epochs"] <= 30 and len(result["grid"]) == 2
    fit, val = stratified_split(train.labels, 0.1, seed=0)
    assert (result["num_fit"], result["num_val"], result["num_test"]) == (len(fit), len(val), 90)
    # The test split is read once, in full, for the final score; selection never touches it.
    assert len(test.reads) == 1 and np.array_equal(test.reads[0], np.arange(90))


def test_finetune_trains_a_copy_and_selects_on_validation():
    train, test = separable_images(120, seed=2, size=8), separable_images(30, seed=3, size=8)
    torch.manual_seed(0)
    encoder = create_backbone("cnn_small", 8, 1)
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    config = {"epochs": 2, "lr_grid": [1e-3], "batch_size": 32, "crop_padding": 1}
    result = evaluate("finetune", encoder, train, test, config, seed=0)
    assert all(torch.equal(v, before[k]) for k, v in encoder.state_dict().items())
    assert 0.0 <= result["test_acc"] <= 1.0 and result["epochs"] in (1, 2) and result["lr"] == 1e-3
    fit, val = stratified_split(train.labels, 0.1, seed=0)
    read = np.concatenate(train.reads)
    assert set(read.tolist()) == set(fit.tolist()) | set(val.tolist())
    assert sum(len(r) for r in test.reads) == len(test)  # scored once
    again = evaluate("finetune", encoder, train, test, config, seed=0)
    assert again["test_acc"] == result["test_acc"] and again["val_acc"] == result["val_acc"]


def test_unknown_protocol_and_keys():
    assert {"linear_probe", "finetune"} <= set(PROTOCOL_SPECS.names())
    train = separable_images(30, seed=0)
    with pytest.raises(KeyError, match="linear_probe"):
        evaluate("svm", FlattenEncoder(16), train, train)
    with pytest.raises(TypeError, match="epoch"):
        evaluate("linear_probe", FlattenEncoder(16), train, train, {"epoch": 3})

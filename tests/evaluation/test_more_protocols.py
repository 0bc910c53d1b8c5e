"""Weighted kNN, few-shot linear probes and the protocol registry on toy separable images."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from evaluation_helpers import FlattenEncoder, separable_images

from dssl.config.protocols import PROTOCOL_SPECS, ProtocolSpec
from dssl.evaluation import FewShotConfig, KnnConfig, evaluate, labelled_subset, stratified_split
from dssl.evaluation import linear_probe as linear_probe_module
from dssl.evaluation.knn import knn_predict

pytestmark = pytest.mark.usefixtures("single_thread")

CLASSES, SIZE = 10, 10  # chance is 0.1
PROBE = {"epochs": 30, "eval_every": 5, "lr_grid": [1e-2], "weight_decay_grid": [0.0]}


def toy_split(num: int, seed: int):
    return separable_images(num, seed=seed, size=SIZE, classes=CLASSES)


def test_knn_beats_chance_and_reports_no_training():
    train, test = toy_split(400, seed=0), toy_split(100, seed=1)
    result = evaluate("knn", FlattenEncoder(SIZE * SIZE), train, test, seed=0)
    assert result["test_acc"] > 0.8 and result["val_acc"] > 0.8
    assert result["epochs"] == 0 and (result["k"], result["temperature"]) == (20, 0.07)
    fit, val = stratified_split(train.labels, 0.1, seed=0)
    assert (result["num_fit"], result["num_val"], result["num_bank"]) == (len(fit), len(val), 400)
    assert len(test.reads) == 1 and np.array_equal(test.reads[0], np.arange(100))  # test scored once


def test_knn_with_one_neighbour_recalls_its_own_training_set():
    train = toy_split(200, seed=2)
    result = evaluate("knn", FlattenEncoder(SIZE * SIZE), train, train, {"k": 1}, seed=0)
    assert result["test_acc"] == 1.0


def test_knn_votes_are_temperature_weighted():
    # Query q: two neighbours of class 0 with similarity 0.6 against one of class 1 with similarity 1.0.
    bank = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.6, -0.8]])
    labels = torch.tensor([1, 0, 0])
    query = torch.tensor([[1.0, 0.0]])
    # exp(1/T) vs 2 exp(0.6/T): a low temperature trusts the closest sample, a high one counts votes.
    assert knn_predict(bank, labels, query, 2, KnnConfig(k=3, temperature=0.07)).item() == 1
    assert knn_predict(bank, labels, query, 2, KnnConfig(k=3, temperature=10.0)).item() == 0
    assert knn_predict(bank, labels, query, 2, KnnConfig(k=50, temperature=10.0)).item() == 0  # k > bank


@pytest.mark.parametrize(("protocol", "per_class"), [("linear_probe_10pct", 5), ("linear_probe_1pct", 1)])
def test_few_shot_probe_uses_only_its_labelled_subset(protocol, per_class, monkeypatch):
    train, test = toy_split(500, seed=3), toy_split(100, seed=4)  # 50 per class
    reads = []
    original = linear_probe_module.label_tensor

    def recording_label_tensor(images, indices, device):
        if images is train:
            reads.append(np.asarray(indices))
        return original(images, indices, device)

    monkeypatch.setattr(linear_probe_module, "label_tensor", recording_label_tensor)
    result = evaluate(protocol, FlattenEncoder(SIZE * SIZE), train, test, PROBE, seed=0)
    assert result["protocol"] == protocol and result["test_acc"] > 0.8
    pool, val = stratified_split(train.labels, 0.1, seed=0)
    labelled = labelled_subset(train.labels, pool, result["label_fraction"], seed=0)
    assert result["num_fit"] == len(labelled) == per_class * CLASSES
    assert np.bincount(train.labels[labelled], minlength=CLASSES).tolist() == [per_class] * CLASSES
    assert np.intersect1d(labelled, val).size == 0
    # The only training labels read: the labelled subset (to train) and the validation split (to select).
    assert [r.tolist() for r in reads] == [labelled.tolist(), val.tolist()]
    assert len(test.reads) == 1


def test_few_shot_probe_is_deterministic_for_a_seed():
    train, test = toy_split(300, seed=5), toy_split(60, seed=6)
    first = evaluate("linear_probe_10pct", FlattenEncoder(SIZE * SIZE), train, test, PROBE, seed=1)
    again = evaluate("linear_probe_10pct", FlattenEncoder(SIZE * SIZE), train, test, PROBE, seed=1)
    assert first == again
    pool, _ = stratified_split(train.labels, 0.1, seed=1)
    subsets = [labelled_subset(train.labels, pool, 0.1, seed) for seed in (1, 1, 2)]
    assert np.array_equal(subsets[0], subsets[1]) and not np.array_equal(subsets[0], subsets[2])


def test_few_shot_draws_average_independent_draws_of_the_labels_on_features_extracted_once():
    from dssl.evaluation.few_shot import draw_seed

    train, test = toy_split(300, seed=5), toy_split(60, seed=6)
    averaged = evaluate("linear_probe_10pct", FlattenEncoder(SIZE * SIZE), train, test, {**PROBE, "draws": 3}, seed=1)
    assert len(test.reads) == 1   # features extracted once for every draw
    seeds = [draw_seed(1, draw) for draw in range(3)]
    assert seeds[0] == 1 and len(set(seeds)) == 3
    singles = [evaluate("linear_probe_10pct", FlattenEncoder(SIZE * SIZE), train, test, PROBE, seed=s) for s in seeds]
    assert [d["seed"] for d in averaged["draws"]] == seeds
    assert [d["test_acc"] for d in averaged["draws"]] == [r["test_acc"] for r in singles]
    assert averaged["test_acc"] == pytest.approx(np.mean([r["test_acc"] for r in singles]))
    assert averaged["seed"] == 1 and averaged["num_draws"] == 3 and averaged["lr"] == singles[0]["lr"]
    with pytest.raises(ValueError, match="draws: must be >= 1, got 0"):
        FewShotConfig(draws=0)


def test_knn_is_deterministic_for_a_seed():
    train, test = toy_split(200, seed=7), toy_split(50, seed=8)
    runs = [evaluate("knn", FlattenEncoder(SIZE * SIZE), train, test, seed=3) for _ in range(2)]
    assert runs[0] == runs[1]


def test_labelled_subset_rounds_per_class_and_keeps_at_least_one():
    labels = np.repeat(np.arange(3), [200, 40, 3])
    pool = np.arange(len(labels))
    counts = np.bincount(labels[labelled_subset(labels, pool, 0.05, seed=0)]).tolist()
    assert counts == [10, 2, 1]
    assert len(labelled_subset(labels, pool, 1.0, seed=0)) == len(labels)
    with pytest.raises(ValueError, match="label_fraction"):
        labelled_subset(labels, pool, 0.0, seed=0)


PROTOCOL_NAMES = ["finetune", "knn", "linear_probe", "linear_probe_10pct", "linear_probe_1pct"]


def test_registry_exposes_configs_and_keys():
    assert PROTOCOL_SPECS.names() == PROTOCOL_NAMES
    assert PROTOCOL_SPECS["knn"].config is KnnConfig
    assert {"k", "temperature", "val_fraction"} <= PROTOCOL_SPECS["knn"].keys
    few_shot = PROTOCOL_SPECS["linear_probe_1pct"]
    assert few_shot.config is FewShotConfig and few_shot.fixed == {"label_fraction": 0.01}
    assert PROTOCOL_SPECS["linear_probe_10pct"].fixed == {"label_fraction": 0.1}
    assert "label_fraction" not in few_shot.keys and PROTOCOL_SPECS["linear_probe"].keys <= few_shot.keys
    assert few_shot.make_config({"epochs": 3}) == FewShotConfig(epochs=3, label_fraction=0.01)
    assert few_shot.options({"epochs": 3}) == few_shot.make_config({"epochs": 3})


def test_registry_rejects_fixed_unknown_and_bad_values():
    few_shot = PROTOCOL_SPECS["linear_probe_1pct"]
    with pytest.raises(TypeError, match="label_fraction"):
        few_shot.make_config({"label_fraction": 0.5})
    with pytest.raises(ValueError, match="label_fraction"):
        few_shot.make_config(FewShotConfig(label_fraction=0.5))
    with pytest.raises(TypeError, match="temprature"):
        PROTOCOL_SPECS["knn"].make_config({"temprature": 0.1})
    with pytest.raises(ValueError, match="k: must be >= 1, got 0"):
        PROTOCOL_SPECS["knn"].make_config({"k": 0})
    with pytest.raises(ValueError, match="optimizer"):
        PROTOCOL_SPECS["finetune"].make_config({"optimizer": "lbfgs"})


@pytest.mark.parametrize("statement", [
    "import dssl.config.protocols",
    "import dssl.evaluation",
    "from dssl.config.protocols import PROTOCOL_SPECS; PROTOCOL_SPECS['knn'].keys",
    "from dssl.config.protocols import PROTOCOL_SPECS; [spec.keys for spec in PROTOCOL_SPECS.values()]",
])
def test_the_specs_import_without_torch(statement):
    """The validator reads every protocol's spec: a fresh interpreter gets them, every one, without torch."""
    code = f"import sys; {statement}; assert 'torch' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", PROTOCOL_NAMES)
def test_each_spec_names_its_module_and_loads_a_callable(name):
    spec = PROTOCOL_SPECS[name]
    assert isinstance(spec, ProtocolSpec) and spec.name == name
    assert PROTOCOL_SPECS.modules_of(name) == [f"dssl.config.protocols.{name}", spec.module]
    assert spec.module.startswith("dssl.evaluation.") and callable(spec.load())
    assert spec.make_config() == spec.config(**spec.fixed)   # the defaults, with what the name fixes

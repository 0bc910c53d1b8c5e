"""Paper A's Table 5 section on constructed weight-distance files and evaluation results."""

from __future__ import annotations

import json

import pytest

from dssl.artifacts import ArtifactError
from dssl.reporting.results import load_results, load_weight_distances
from dssl.reporting.sections import ReportContext, create_section
from dssl.reporting.tables import load_paper_numbers

from report_helpers import result, write_results

PAIRS = ("local 1 vs local 10", "local 1 vs global", "local 10 vs global")
OPTIONS = {"protocol": "finetune", "partition": "fl-label",
           "columns": {"SimSiam + CNN": "simsiam-cnn:fedavg", "MAE + CNN": "mae-cnn:fedavg"},
           "closer": {"MAE + CNN": "SimSiam + CNN"}}


def write_distances(folder, model: str, strategy: str, base: float, seeds=(0, 1, 2)) -> None:
    for seed in seeds:
        path = folder / model / "fl-label" / strategy / f"seed-{seed}" / "distances.json"
        path.parent.mkdir(parents=True)
        distances = {pair: base + i + 0.1 * seed for i, pair in enumerate(PAIRS)}
        path.write_text(json.dumps({"stage": f"weight_distance@{model}-fl-label-{strategy}", "model": model,
                                    "partition": "fl-label", "strategy": strategy, "seed": seed, "clients": [0, 9],
                                    "form": "layerwise_sum", "distances": distances}))


def context(tmp_path, accuracy: dict[str, float], random: float = 0.5) -> ReportContext:
    records = []
    for seed, noise in enumerate((0.0, 0.01, -0.01)):
        for model, acc in accuracy.items():
            records.append(result("fl", model.split("-")[0], "cnn_small", "dirichlet_balanced", test_acc=acc + noise,
                                  seed=seed, strategy="fedavg", model=model))
        records.append(result("random", None, "cnn_small", None, test_acc=random + noise, seed=seed))
    return ReportContext(load_results(write_results(tmp_path / "results", records)), "embedded", "digits",
                         load_paper_numbers(), weight_distances=load_weight_distances(tmp_path / "local"))


def test_mim_closer_than_cl_is_supported_per_pair(tmp_path):
    write_distances(tmp_path / "local", "simsiam-cnn", "fedavg", base=10.0)
    write_distances(tmp_path / "local", "mae-cnn", "fedavg", base=6.0)
    out = create_section("table5", OPTIONS).render(context(tmp_path, {"simsiam-cnn": 0.8, "mae-cnn": 0.8}))
    assert [f.verdict for f in out.findings] == ["supported"] * 3
    assert out.findings[0].difference.mean == pytest.approx(4.0) and out.findings[0].unit == "l2 distance"
    assert "+4.00 [" in out.findings[0].evidence() and out.findings[0].evidence().endswith("l2 distance")
    cells = out.data.set_index(["row", "column"])
    assert cells.loc[("local 1 vs global", "MAE + CNN"), "mean"] == pytest.approx(7.1)   # 7 + mean(0, .1, .2)
    assert "45.37" in out.markdown                                                          # the paper's value


def test_columns_of_different_seeds_are_untestable_not_paired(tmp_path):
    """A column whose grid sets other seeds: its distances cannot be paired seed by seed with the other's."""
    write_distances(tmp_path / "local", "simsiam-cnn", "fedavg", base=10.0, seeds=(0, 1))
    write_distances(tmp_path / "local", "mae-cnn", "fedavg", base=6.0)
    out = create_section("table5", OPTIONS).render(context(tmp_path, {"simsiam-cnn": 0.8, "mae-cnn": 0.8}))
    assert {f.verdict for f in out.findings} == {"untestable"}
    assert "different seeds (0, 1 and 0, 1, 2)" in out.findings[0].detail


def test_mim_farther_contradicts_and_weak_pretraining_is_untestable(tmp_path):
    write_distances(tmp_path / "local", "simsiam-cnn", "fedavg", base=6.0)
    write_distances(tmp_path / "local", "mae-cnn", "fedavg", base=10.0)
    out = create_section("table5", OPTIONS).render(context(tmp_path, {"simsiam-cnn": 0.8, "mae-cnn": 0.8}))
    assert {f.verdict for f in out.findings} == {"contradicted"}
    untestable = create_section("table5", OPTIONS).render(context(tmp_path, {"simsiam-cnn": 0.8, "mae-cnn": 0.45}))
    assert {f.verdict for f in untestable.findings} == {"untestable"}


def test_no_distances_renders_the_empty_text(tmp_path):
    out = create_section("table5", OPTIONS).render(context(tmp_path, {"simsiam-cnn": 0.8}))
    assert "No weight_distance results" in out.markdown and out.findings == []


def test_damaged_distance_file_and_bad_options_fail_clearly(tmp_path):
    write_distances(tmp_path / "local", "mae-cnn", "fedavg", base=1.0, seeds=(0,))
    path = tmp_path / "local" / "mae-cnn" / "fl-label" / "fedavg" / "seed-0" / "distances.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "distances": {"local 1 vs global": -1}}))
    with pytest.raises(ArtifactError, match="distances"):
        load_weight_distances(tmp_path / "local")
    with pytest.raises(ValueError, match="not among"):
        create_section("table5", {**OPTIONS, "closer": {"MAR": "MAE + CNN"}})
    with pytest.raises(ValueError, match="'<model>:<strategy>'"):
        create_section("table5", {**OPTIONS, "columns": {"A": "mae-cnn"}})


def test_a_model_gated_on_its_declared_protocol(tmp_path):
    """MAE + CNN below random init on the section's protocol but above it on kNN: with ``protocols``
    naming kNN for it, its gate reads kNN (both its cell and the random-init reference) and the claim is tested."""
    write_distances(tmp_path / "local", "simsiam-cnn", "fedavg", base=10.0)
    write_distances(tmp_path / "local", "mae-cnn", "fedavg", base=6.0)
    records = []
    for seed, noise in enumerate((0.0, 0.01, -0.01)):
        for model, protocol, acc in (("simsiam-cnn", "finetune", 0.8), ("mae-cnn", "finetune", 0.45),
                                     ("mae-cnn", "knn", 0.7)):
            records.append(result("fl", model.split("-")[0], "cnn_small", "dirichlet_balanced", protocol=protocol,
                                  test_acc=acc + noise, seed=seed, strategy="fedavg", model=model))
        for protocol, acc in (("finetune", 0.5), ("knn", 0.6)):
            records.append(result("random", None, "cnn_small", None, protocol=protocol, test_acc=acc + noise,
                                  seed=seed))
    ctx = ReportContext(load_results(write_results(tmp_path / "results", records)), "embedded", "digits",
                        load_paper_numbers(), weight_distances=load_weight_distances(tmp_path / "local"))
    assert {f.verdict for f in create_section("table5", OPTIONS).render(ctx).findings} == {"untestable"}
    out = create_section("table5", {**OPTIONS, "protocols": {"mae-cnn": "knn"}}).render(ctx)
    assert [f.verdict for f in out.findings] == ["supported"] * 3
    assert "finetune; mae-cnn on knn" in out.markdown

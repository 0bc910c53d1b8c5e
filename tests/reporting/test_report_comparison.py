"""Strategy comparison tables (paper A Fig. 2b, Tables 6-8) on constructed results."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dssl.config.checker import Checker
from dssl.reporting.results import load_results
from dssl.reporting.sections import ReportContext, check_report_params, create_section
from dssl.reporting.tables import load_paper_numbers

from report_helpers import decl_result, result, write_results

NOISE = (0.0, 0.01, -0.01)


def fl_cells(accuracy: dict[tuple[str, str], float], random: float = 0.5) -> list[dict]:
    """MAE-CNN FL results per (strategy, partition) and the random-init CNN, three seeds."""
    schemes = {"fl-iid": "iid", "fl-label": "dirichlet_balanced"}
    records = []
    for seed, noise in enumerate(NOISE):
        for (strategy, partition), acc in accuracy.items():
            records.append(result("fl", "mae_cnn", "cnn_small", schemes[partition], test_acc=acc + noise, seed=seed,
                                  strategy=strategy))
        records.append(result("random", None, "cnn_small", None, test_acc=random + noise, seed=seed))
    return records


def context(tmp_path, records) -> ReportContext:
    return ReportContext(load_results(write_results(tmp_path, records)), "embedded", "digits", load_paper_numbers())


def test_table8_best_row_claim_per_column(tmp_path):
    accuracy = {("fedavg", "fl-label"): 0.80, ("mar-g0.1", "fl-label"): 0.82, ("mar-cos", "fl-label"): 0.84}
    section = create_section("table8", {"model": "mae_cnn-cnn", "columns": {"cifar100": "fl-label"},
                                        "rows": {"0": "fedavg", "0.1": "mar-g0.1", "cosine_0.1_to_0.001": "mar-cos"}})
    out = section.render(context(tmp_path, fl_cells(accuracy)))
    assert len(out.findings) == 1 and out.findings[0].verdict == "supported"
    assert out.findings[0].difference.mean == pytest.approx(0.02)      # cosine - 0.1, the closest row
    assert "54.91" in out.markdown                                    # the paper's value beside ours
    cells = out.data.set_index("row")
    assert cells.loc["0.1", "mean"] == pytest.approx(82.0) and cells.loc["0.1", "strategy"] == "mar-g0.1"


def test_a_row_above_the_best_contradicts(tmp_path):
    accuracy = {("fedavg", "fl-label"): 0.86, ("mar-cos", "fl-label"): 0.84}
    section = create_section("table8", {"model": "mae_cnn-cnn", "columns": {"cifar100": "fl-label"},
                                        "rows": {"0": "fedavg", "cosine_0.1_to_0.001": "mar-cos"}})
    assert section.render(context(tmp_path, fl_cells(accuracy))).findings[0].verdict == "contradicted"


def test_fig2b_untestable_when_pretraining_loses_to_random_init(tmp_path):
    accuracy = {("fedavg", "fl-iid"): 0.80, ("mar", "fl-iid"): 0.82,
                ("fedavg", "fl-label"): 0.86, ("mar", "fl-label"): 0.90}
    section = create_section("fig2b", {"model": "mae_cnn-cnn", "rows": {"MAE": "fedavg", "MAR": "mar"},
                                       "columns": {"alpha=1e5": "fl-iid", "alpha=0.1": "fl-label"}})
    verdicts = [f.verdict for f in section.render(context(tmp_path, fl_cells(accuracy, random=0.83))).findings]
    assert verdicts == ["untestable", "supported"]   # MAE at IID (80 %) does not beat random init (83 %)


def test_per_column_row_specs_and_pinned_places(tmp_path):
    records = []
    for seed, noise in enumerate(NOISE):
        for graph, conn, strategy, acc in (("uniform-5", 5, "decl-ds", 0.70), ("uniform-5", 5, "decl-mh", 0.71),
                                           ("complete", 20, "decl-uniform", 0.80)):
            records.append(decl_result("uniform" if conn < 20 else "complete", conn, acc + noise, seed=seed,
                                       graph=graph, strategy=strategy))
        records.append(result("random", None, "vit_small", None, test_acc=0.5 + noise, seed=seed))
    section = create_section("table6", {"model": "mae-vit", "columns": {"connectivity_5": "uniform-5"},
                                        "rows": {"fl_reference": "decl-uniform@complete", "data_size": "decl-ds",
                                                 "doubly_stochastic": {"connectivity_5": "decl-mh"}}})
    out = section.render(context(tmp_path, records))
    assert set(out.data["place"]) == {"uniform-5", "complete"}
    assert out.findings[0].verdict == "supported" and "doubly_stochastic" in out.findings[0].detail


def test_table6_says_how_far_each_rule_mixes_from_uniform_and_what_ran(tmp_path):
    records = [decl_result("general", 5, acc + noise, seed=seed, graph="general-5", strategy=strategy)
               for seed, noise in enumerate(NOISE) for strategy, acc in (("decl-ds", 0.70), ("decl-mh", 0.71))]
    ctx = context(tmp_path, records)
    ctx.graphs = {"general-5": {"connectivity_min": 3.0, "connectivity_max": 8.0, "connectivity_mean": 5.0,
                                "distance_to_uniform_data_size": 0.012, "distance_to_uniform_metropolis_hastings": 0.0}}
    ctx.strategies = {"decl-ds": {"name": "fedavg", "mixing": "data_size", "order": "mix_then_train"},
                      "decl-mh": {"name": "fedavg", "mixing": "metropolis_hastings"}}
    ctx.models = {"mae-vit": {"method": "mae", "backbone": "vit_small"}}
    section = create_section("table6", {"model": "mae-vit", "columns": {"connectivity_5": "general-5"},
                                        "rows": {"fl_reference": "decl-uniform@complete", "data_size": "decl-ds",
                                                 "doubly_stochastic": "decl-mh"}})
    text = section.render(ctx).markdown
    assert "|A_i| from 3 to 8 (mean 5.00)" in text
    assert "data_size (data_size) 0.012, doubly_stochastic (metropolis_hastings) 0" in text
    assert "doubly_stochastic mix exactly as uniform weights on this graph" in text
    assert "mae-vit = mae on vit_small" in text
    assert "decl-ds = fedavg (aggregation=uniform, keep_local=False, mixing=data_size, order=mix_then_train)" in text


def test_bad_options_fail_when_the_section_is_created():
    with pytest.raises(ValueError, match="not among the rows"):
        create_section("table8", {"model": "m", "rows": {"0": "a"}, "columns": {"x": "p"}})
    with pytest.raises(ValueError, match="exactly MAE and MAR"):
        create_section("fig2b", {"model": "m", "rows": {"MAE": "a", "MIM": "b"}, "columns": {"x": "p"}})
    with pytest.raises(ValueError, match="framework must be one of"):
        create_section("table8", {"model": "m", "rows": {"0": "a"}, "columns": {"x": "p"}, "framework": "p2p"})
    with pytest.raises(TypeError, match="no option"):
        create_section("table6", {"model": "m", "rows": {"0": "a"}, "columns": {"x": "p"}, "colums": {}})


def test_cell_specs_resolve_model_strategy_and_place():
    section = create_section("table8", {"model": "mae-cnn", "columns": {"a": "fl-iid", "b": "mar@fl-label"},
                                        "rows": {"x": "byol-cnn:fedavg", "y": "fedavg@fl-2class", "z": {"b": "mar2"}},
                                        "best": "x"})
    assert section.spec("x", "a") == ("fl", "byol-cnn", "fedavg", "fl-iid")
    assert section.spec("y", "a") == ("fl", "mae-cnn", "fedavg", "fl-2class")   # the row's place wins
    assert section.spec("z", "a") is None and section.spec("z", "b") == ("fl", "mae-cnn", "mar2", "fl-label")


def test_rows_of_other_frameworks_resolve_to_central_and_stand_alone_cells():
    section = create_section("fedema", {"model": "byol-cnn", "columns": {"non_iid": "fl-2class"},
                                        "rows": {"Stand-alone": "local/byol-cnn", "FedEMA": "fedema",
                                                 "Centralised BYOL": "central/byol-cnn"},
                                        "references": ["Centralised BYOL"]})
    assert section.spec("Stand-alone", "non_iid") == ("local", "byol-cnn", "", "fl-2class")
    assert section.spec("Centralised BYOL", "non_iid") == ("central", "byol-cnn", "", "")
    for bad in ("p2p/byol-cnn", "central/byol-cnn@fl-iid", "local/byol-cnn:fedavg"):
        with pytest.raises(ValueError, match="is not 'central/<model>' or 'local/<model>'"):
            create_section("fedema", {"model": "m", "columns": {"x": "p"}, "rows": {"FedEMA": "a", "S": bad}})
    with pytest.raises(ValueError, match="must be rows other than the claim's row"):
        create_section("fedema", {"model": "m", "columns": {"x": "p"}, "rows": {"FedEMA": "a"},
                                  "references": ["FedEMA"]})


def stop_gradient_cells(accuracy: dict[str, float], random: float = 0.5) -> list[dict]:
    """Paper B's stop-gradient ablation: four models on the 2-class split, the random CNN, three seeds."""
    records = []
    for seed, noise in enumerate(NOISE):
        for model, acc in accuracy.items():
            method = model.split("-")[0]
            records.append(result("fl", method, "cnn_small", "dirichlet_balanced", test_acc=acc + noise, seed=seed,
                                  strategy="fedssl", model=model, partition="fl-2class"))
        records.append(result("random", None, "cnn_small", None, test_acc=random + noise, seed=seed))
    return records


STOP_GRADIENT = {"model": "byol-cnn", "columns": {"BYOL": "fl-2class", "SimSiam": "fl-2class"},
                 "rows": {"with stop-gradient": {"BYOL": "byol-cnn:fedssl", "SimSiam": "simsiam-cnn:fedssl"},
                          "without stop-gradient": {"BYOL": "byol-nosg:fedssl", "SimSiam": "simsiam-nosg:fedssl"}}}


def test_stop_gradient_is_necessary_for_simsiam_not_for_byol(tmp_path):
    accuracy = {"byol-cnn": 0.80, "byol-nosg": 0.70, "simsiam-cnn": 0.80, "simsiam-nosg": 0.40}
    out = create_section("fedssl_stop_gradient", STOP_GRADIENT).render(context(tmp_path, stop_gradient_cells(accuracy)))
    by_subject = {f.subject.split(":")[0]: f for f in out.findings}
    byol, simsiam = by_subject["FL BYOL"], by_subject["FL SimSiam"]
    assert byol.verdict == "supported" and byol.difference.mean == pytest.approx(0.20)   # 70 % vs random 50 %
    assert "works without" in byol.claim
    assert simsiam.verdict == "supported" and simsiam.difference.mean == pytest.approx(0.40)


def test_byol_collapsing_without_stop_gradient_contradicts_and_weak_pretraining_is_untestable(tmp_path):
    accuracy = {"byol-cnn": 0.80, "byol-nosg": 0.30, "simsiam-cnn": 0.45, "simsiam-nosg": 0.40}
    out = create_section("fedssl_stop_gradient", STOP_GRADIENT).render(context(tmp_path, stop_gradient_cells(accuracy)))
    verdicts = {f.subject.split(":")[0]: f.verdict for f in out.findings}
    assert verdicts == {"FL BYOL": "contradicted", "FL SimSiam": "untestable"}   # SimSiam 45 % < random 50 %


def test_stop_gradient_options_are_checked():
    with pytest.raises(ValueError, match="not among"):
        create_section("fedssl_stop_gradient", {**STOP_GRADIENT, "works_without": ["MoCo"]})


def test_table2_prints_each_rows_parameter_counts(tmp_path):
    records = []
    for seed, noise in enumerate(NOISE):
        for model, strategy, acc, size in (("fedmar-vit", "fedmar", 0.84, 2_500_000),
                                           ("byol-cnn", "fedema", 0.80, 1_200_000)):
            records.append(result("fl", model.split("-")[0], "cnn_small", "dirichlet_balanced", test_acc=acc + noise,
                                  seed=seed, strategy=strategy, model=model, method_parameters=size,
                                  encoder_parameters=400_000))
        records.append(result("random", None, "cnn_small", None, test_acc=0.5 + noise, seed=seed))
    section = create_section("table2", {"model": "fedmar-vit", "columns": {"cifar100": "fl-label"},
                                        "rows": {"fedema_r18": "byol-cnn:fedema", "fedmar_r18": "fedmar"}})
    out = section.render(context(tmp_path, records))
    sizes = section.sizes(out.data, context(tmp_path, records))
    assert sizes.loc["fedema_r18", "method (M)"] == "1.200" and sizes.loc["fedmar_r18", "encoder (M)"] == "0.400"
    assert "Model sizes" in out.markdown and out.findings[0].verdict == "supported"


def test_lambda_sweep_draws_accuracy_against_lambda(tmp_path):
    records = []
    for seed, noise in enumerate(NOISE):
        for strategy, acc in (("fedema-l0p4", 0.70), ("fedema-l0p8", 0.74), ("fedema-l1p6", 0.72)):
            records.append(result("fl", "byol", "cnn_small", "dirichlet_balanced", test_acc=acc + noise, seed=seed,
                                  strategy=strategy, model="byol-cnn", partition="fl-2class"))
    section = create_section("fedema_lambda", {"model": "byol-cnn", "partition": "fl-2class", "protocol": "finetune",
                                               "points": {"0.4": "fedema-l0p4", "0.8": "fedema-l0p8",
                                                          "1.6": "fedema-l1p6"}})
    out = section.render(context(tmp_path, records))
    assert out.data.set_index("x").loc[0.8, "mean"] == pytest.approx(74.0) and out.findings == []
    drawn = out.figures["fedema_lambda.png"](tmp_path / "sweep.png")
    assert drawn.stat().st_size > 1000
    with pytest.raises(ValueError, match="at least two"):
        create_section("fedema_lambda", {"model": "m", "partition": "p", "points": {"0.4": "a"}})


def test_fedema_against_stand_alone_clients_with_the_central_model_as_a_reference(tmp_path):
    """Paper B's linear-evaluation table: the stand-alone row (local cells, the mean over clients) is compared;
    the centralised row is printed but, as a reference, never enters the claim even when it is the best."""
    records = []
    for seed, noise in enumerate(NOISE):
        for strategy, acc in {"fedssl": 0.70, "fedema": 0.80}.items():
            records.append(result("fl", "byol", "cnn_small", "dirichlet_balanced", test_acc=acc + noise, seed=seed,
                                  strategy=strategy, model="byol-cnn", partition="fl-2class"))
        records.append(result("local", "byol", "cnn_small", None, test_acc=0.60 + noise, seed=seed, model="byol-cnn",
                              partition="fl-2class", clients={"0": 0.5, "1": 0.7}))
        records.append(result("central", "byol", "cnn_small", None, test_acc=0.95 + noise, seed=seed, model="byol-cnn"))
        records.append(result("random", None, "cnn_small", None, test_acc=0.50 + noise, seed=seed))
    options = {"model": "byol-cnn", "columns": {"non_iid": "fl-2class"},
               "rows": {"Stand-alone": "local/byol-cnn", "FedBYOL": "fedssl", "FedEMA": "fedema",
                        "Centralised BYOL": "central/byol-cnn"},
               "references": ["Centralised BYOL"], "paper_scale_only": ["FedEMA with a constant lambda"]}
    out = create_section("fedema", options).render(context(tmp_path, records))
    (finding,) = out.findings
    assert finding.verdict == "supported" and "Centralised" not in finding.subject
    assert finding.difference.mean == pytest.approx(0.10)   # FedEMA - FedBYOL, the closest compared row
    means = dict(zip(out.data["row"], out.data["mean"]))
    assert means["Stand-alone"] == pytest.approx(60.0) and means["Centralised BYOL"] == pytest.approx(95.0)
    assert "Reference rows, not part of the claim: Centralised BYOL" in out.markdown
    assert "Paper-scale only (not run in this profile): FedEMA with a constant lambda" in out.markdown
    assert "| Stand-alone | non_iid | local/byol-cnn/fl-2class |" in out.markdown   # the complete cell
    ctx = context(tmp_path / "with-configs", records)
    ctx.strategies = {"fedema": {"name": "fedema", "aggregation": "data_size"},
                      "fedssl": {"name": "fedssl", "aggregation": "data_size"}}
    text = create_section("fedema", options).render(ctx).markdown
    assert "fedema = fedema (aggregation=data_size, divergence=paper, scaler=auto, tau=0.7, ema_lambda=0.8, " \
           "skipped=restart)" in text   # the defaults it ran with, as the strategy's spec declares them
    assert "read on the norm paper B's code tuned them on" in text


def _three_dataset_cells() -> list[dict]:
    """Table 2's two rows on one partition, fine-tuned on three datasets with different orderings per
    dataset, and the random-init CNN on each (three seeds)."""
    accuracy = {"cifar10": {"fedema": 0.80, "fedmar": 0.90}, "cifar100": {"fedema": 0.60, "fedmar": 0.50},
                "imagenet": {"fedema": 0.40, "fedmar": 0.45}}
    records = []
    for seed, noise in enumerate(NOISE):
        for dataset, rows in accuracy.items():
            for strategy, acc in rows.items():
                records.append(result("fl", "mae_cnn", "cnn_small", "dirichlet_balanced", dataset=dataset,
                                      test_acc=acc + noise, seed=seed, strategy=strategy))
            records.append(result("random", None, "cnn_small", None, dataset=dataset, test_acc=0.1 + noise,
                                  seed=seed))
    return records


def test_every_cell_and_claim_of_a_comparison_reads_one_dataset(tmp_path):
    columns = {name: {"place": "fl-label", "dataset": name} for name in ("cifar10", "cifar100", "imagenet")}
    section = create_section("table2", {"model": "mae_cnn-cnn", "columns": columns, "best": "fedmar_r18",
                                        "rows": {"fedema_r18": "fedema", "fedmar_r18": "fedmar"}})
    out = section.render(context(tmp_path, _three_dataset_cells()))
    cells = out.data.set_index(["row", "column"])
    # each cell's mean and seeds come from its column's dataset only: three seeds, never nine
    assert cells.loc[("fedmar_r18", "cifar10"), "mean"] == pytest.approx(90.0)
    assert cells.loc[("fedmar_r18", "cifar100"), "mean"] == pytest.approx(50.0)
    assert cells.loc[("fedema_r18", "imagenet"), "mean"] == pytest.approx(40.0)
    assert set(cells["n"]) == {3} and list(cells["dataset"].unique()) == ["cifar10", "cifar100", "imagenet"]
    # one claim per column, paired on that dataset's seeds: FedMAR wins on CIFAR-10 and ImageNet, loses on CIFAR-100
    verdicts = {f.subject.split(":")[0]: f.verdict for f in out.findings}
    assert verdicts == {"FL cifar10": "supported", "FL cifar100": "contradicted", "FL imagenet": "supported"}
    assert {f.difference.n for f in out.findings} == {3}
    assert [f.difference.mean for f in out.findings] == pytest.approx([0.10, -0.10, 0.05])
    assert "cifar10: cifar10, cifar100: cifar100, imagenet: imagenet" in out.markdown


def test_a_comparison_without_dataset_columns_reads_the_report_dataset(tmp_path):
    section = create_section("table8", {"model": "mae_cnn-cnn", "columns": {"cifar100": "fl-label"},
                                        "rows": {"0": "fedema", "cosine_0.1_to_0.001": "fedmar"}})
    records = _three_dataset_cells()
    ctx = ReportContext(load_results(write_results(tmp_path, records)), "paper", "cifar100", load_paper_numbers())
    out = section.render(ctx)
    assert out.data["mean"].tolist() == pytest.approx([60.0, 50.0]) and set(out.data["n"]) == {3}
    assert [f.verdict for f in out.findings] == ["contradicted"]
    with_option = create_section("table8", {"model": "mae_cnn-cnn", "columns": {"cifar100": "fl-label"},
                                            "rows": {"0": "fedema", "cosine_0.1_to_0.001": "fedmar"},
                                            "dataset": "imagenet"})
    assert with_option.render(ctx).data["mean"].tolist() == pytest.approx([40.0, 45.0])


def test_malformed_dataset_columns_fail_when_the_section_is_created():
    with pytest.raises(ValueError, match="column 'cifar10'"):
        create_section("table2", {"model": "m", "rows": {"fedmar_r18": "fedmar", "x": "y"},
                                  "columns": {"cifar10": {"partition": "fl-label"}}})


def test_the_gate_reads_the_claims_row_only_and_the_finding_names_it(tmp_path):
    """"R is above every other row" needs R's pretraining to beat random init; a compared row below random init
    is an outcome the claim predicts (a baseline learning less), so the claim is tested, and says what it gated."""
    records = []
    for seed, noise in enumerate(NOISE):
        for strategy, acc in {"fedmar-g0p1": 0.60, "fedmar-cos": 0.45, "fedmar-mmd": 0.58}.items():
            records.append(result("fl", "mae", "vit_small", "dirichlet_balanced", test_acc=acc + noise, seed=seed,
                                  strategy=strategy, model="mae-vit"))
        records.append(result("random", None, "vit_small", None, test_acc=0.50 + noise, seed=seed))
    rows = {"ammd_mean_sigma": "fedmar-g0p1", "cosine_similarity": "fedmar-cos", "vanilla_mmd_sigma1": "fedmar-mmd"}
    section = create_section("table7", {"model": "mae-vit", "columns": {"gamma_0.1": "fl-label"}, "rows": rows})
    (finding,) = section.render(context(tmp_path, records)).findings
    assert finding.verdict == "supported" and finding.gated == ("ammd_mean_sigma",)   # cosine: 45 % < random 50 %
    assert "(gated: ammd_mean_sigma)" in finding.line()
    weak = [dict(r, test_acc=r["test_acc"] - 0.15) if r.get("strategy") == "fedmar-g0p1" else r for r in records]
    (finding,) = section.render(context(tmp_path / "weak", weak)).findings
    assert finding.verdict == "untestable" and "ammd_mean_sigma: pretraining does not beat" in finding.detail


def test_a_column_named_after_a_dataset_it_does_not_read_is_refused():
    """Table 8's column labelled "cifar100" while its cells are scored on digits: the label must say what ran."""
    section = create_section("table8", {"model": "mae-vit", "rows": {"cosine_0.1_to_0.001": "fedmar"},
                                        "columns": {"cifar100": "fl-label"}})
    (problem,) = section.label_problems("digits", ["digits", "cifar100"])
    assert "'cifar100' names a dataset" in problem and "'digits'" in problem
    assert section.label_problems("cifar100", ["digits", "cifar100"]) == []
    relabelled = create_section("table8", {"model": "mae-vit", "rows": {"cosine_0.1_to_0.001": "fedmar"},
                                           "columns": {"digits": "fl-label"}})
    assert relabelled.label_problems("digits", ["digits", "cifar100"]) == []


@pytest.mark.parametrize("name", ["params.yaml", "configs/ci.yaml", "configs/paper.yaml", "configs/paper_b.yaml",
                                  "configs/paper_b_cifar100.yaml"])
def test_every_section_a_params_file_lists_builds_from_its_options(name):
    """Each comparison is a module of its own that the package imports to register it: a section a params file
    lists (paper B's fedema_non_iid_level runs only at paper scale) must be known and build from its options."""
    params = yaml.safe_load((Path(__file__).parents[2] / name).read_text())
    sections = params["report"]["sections"]
    checker = Checker(params, None)
    check_report_params(checker)
    assert [str(problem) for problem in checker.problems] == []
    assert {type(create_section(section, options)).name for section, options in sections.items()} == set(sections)


def test_a_row_with_more_seeds_is_gated_on_all_and_compared_on_the_seeds_both_ran(tmp_path):
    """Paper B's FedBYOL runs 8 seeds for its gate, the rows it is compared with 4: the gate reads its 8, each
    comparison the 4 both ran, and the finding says so. On its first 4 seeds alone the claimed row would not pass
    the gate (its gain over random init spreads across 0 there)."""
    gains = {0: 0.03, 1: -0.01, 2: 0.04, 3: -0.005, 4: 0.03, 5: 0.025, 6: 0.02, 7: 0.035}
    records = [result("random", None, "cnn_small", None, test_acc=0.80, seed=seed) for seed in range(8)]
    records += [result("fl", "mae_cnn", "cnn_small", "iid", test_acc=0.80 + gain, seed=seed, strategy="best")
                for seed, gain in gains.items()]
    records += [result("fl", "mae_cnn", "cnn_small", "iid", test_acc=0.78 + 0.001 * seed, seed=seed, strategy="other")
                for seed in range(4)]
    section = create_section("table8", {"model": "mae_cnn-cnn", "columns": {"cifar100": "fl-iid"},
                                        "rows": {"0": "other", "cosine_0.1_to_0.001": "best"}})
    finding = section.render(context(tmp_path, records)).findings[0]
    shared = [0.80 + gains[s] - (0.78 + 0.001 * s) for s in range(4)]
    assert finding.difference.n == 4 and finding.difference.mean == pytest.approx(sum(shared) / 4)
    assert "paired on seeds 0, 1, 2, 3, which both ran: cosine_0.1_to_0.001 ran 8" in finding.detail
    assert finding.verdict != "untestable" and finding.gated == ("cosine_0.1_to_0.001",)

    first_four = [r for r in records if r["seed"] < 4]
    blocked = section.render(context(tmp_path / "four", first_four)).findings[0]
    assert blocked.verdict == "untestable" and "paired on seeds" not in blocked.detail


def test_table2_states_each_backbone_from_random_init_on_the_rows_seeds(tmp_path):
    """Paper A's Table 2 sets FedMAR on its ViT against baselines on a CNN: the section prints both backbones from
    random init, scored as the rows are, so a reader sees what the backbone alone gives."""
    records = []
    for seed, noise in enumerate(NOISE):
        records.append(result("fl", "mae", "vit_small", "dirichlet_balanced", test_acc=0.48 + noise, seed=seed,
                              strategy="fedmar", model="mae-vit"))
        records.append(result("fl", "byol", "cnn_small", "dirichlet_balanced", test_acc=0.93 + noise, seed=seed,
                              strategy="t2-fedema", model="byol-cnn"))
        records.append(result("random", None, "vit_small", None, test_acc=0.31 + noise, seed=seed))
    records += [result("random", None, "cnn_small", None, test_acc=0.95 + noise, seed=seed)
                for seed, noise in enumerate((*NOISE, -0.5))]   # a fourth seed no row ran: left out
    section = create_section("table2", {"model": "mae-vit", "columns": {"digits": "fl-label"},
                                        "rows": {"fedema_r18": "byol-cnn:t2-fedema", "fedmar_tinyvit": "fedmar"},
                                        "best": "fedmar_tinyvit"})
    out = section.render(context(tmp_path, records))
    assert out.findings[0].verdict == "contradicted"
    line = next(line for line in out.markdown.splitlines() if line.startswith("**The rows' backbones"))
    assert "vit_small 31.00 ± " in line and "cnn_small 95.00 ± " in line and "[n=3]" in line


def test_rows_a_claim_pairs_must_share_a_seed_before_the_run():
    """FedBYOL's grid on seeds no other paper B row runs: every claim that pairs it seed by seed would fail after
    the run, so the params check names each (section, column, both rows' seeds) before any stage starts; the
    stop-gradient claim's "works without" column reads its row against random init and pairs nothing."""
    params = yaml.safe_load((Path(__file__).parents[2] / "params.yaml").read_text())
    params["pretrain"]["fl"]["grids"]["paper-b-byol"]["seeds"] = [8, 9]
    checker = Checker(params, None)
    check_report_params(checker)
    problems = [(problem.path.rpartition(".")[2], problem.message) for problem in checker.problems]
    assert {section for section, _ in problems} == {"fedssl_methods", "fedssl_predictor", "fedema"}
    methods = [message for section, message in problems if section == "fedssl_methods"]
    assert len(methods) == 3 and methods[0].startswith(
        "column 'non_iid': rows 'FedBYOL' (seeds [8, 9]) and 'FedSimCLR' (seeds [0, 1, 2, 3]) share no seed")
    stop_gradient = create_section("fedssl_stop_gradient", params["report"]["sections"]["fedssl_stop_gradient"])
    assert stop_gradient.seed_problems(params) == []

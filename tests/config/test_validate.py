"""`dssl validate`: every bad input is reported with its key path, exit status 2; good files pass."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from dssl.cli import main
from dssl.config.checker import ParamsError
from dssl.config.params import load_params, read_params, validate

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def good() -> dict:
    return read_params(REPO / "params.yaml")


def problems_of(params: dict, root: Path = REPO) -> dict[str, str]:
    return {p.path: p.message for p in validate(params, root)}


@pytest.mark.parametrize("file", ["params.yaml", "configs/ci.yaml"])
def test_shipped_params_files_are_valid(file: str) -> None:
    assert validate(read_params(REPO / file), REPO) == []


def test_alpha_must_be_positive(good: dict) -> None:
    good["partitions"]["fl-label"]["alpha"] = 0
    assert problems_of(good) == {"partitions.fl-label.alpha": "must be > 0, got 0"}


def test_more_clients_than_samples(good: dict) -> None:
    good["partitions"]["fl-iid"]["clients"] = 5000
    problems = problems_of(good)
    assert problems["partitions.fl-iid.clients"] == "5000 clients but digits has only 1347 training samples"


def test_connectivity_outside_range(good: dict) -> None:
    clients = good["partitions"]["decl-label"]["clients"]
    good["graphs"]["uniform-3"]["connectivity"] = clients + 1
    message = problems_of(good)["graphs.uniform-3.connectivity"]
    assert f"outside 2..N = 2..{clients}" in message


def test_impossible_regular_graph(good: dict) -> None:
    good["partitions"]["decl-label"]["clients"] = 19
    good["graphs"]["uniform-5"]["connectivity"] = 4  # degree 3 on 19 nodes: odd degree sum
    message = problems_of(good)["graphs.uniform-5.connectivity"]
    assert "no regular graph of degree 3 on 19 clients exists" in message


def test_unknown_dataset_and_scheme(good: dict) -> None:
    good["datasets"]["svhn"] = {}
    good["partitions"]["fl-iid"]["scheme"] = "pathological"
    problems = problems_of(good)
    assert problems["datasets.svhn"] == "unknown dataset"
    assert problems["partitions.fl-iid.scheme"] == "unknown value 'pathological'"


def test_missing_dataset_folder(good: dict, tmp_path: Path) -> None:
    good["datasets"]["mini_imagenet"] = {"root": str(tmp_path / "absent")}
    assert "absent does not exist" in problems_of(good)["datasets.mini_imagenet.root"]
    (tmp_path / "absent" / "train").mkdir(parents=True)
    assert "datasets.mini_imagenet.root" not in problems_of(good)
    good["datasets"]["imagenet"] = {"root": str(tmp_path / "absent")}
    (tmp_path / "absent" / "cat").mkdir()
    assert "datasets.imagenet.root" not in problems_of(good)
    (tmp_path / "absent" / "train").rmdir()
    problems = problems_of(good)
    assert "datasets.mini_imagenet.root" not in problems  # class folders under the root: one pooled folder
    assert problems["datasets.imagenet.root"].endswith("has no train/ folder")


def test_mini_imagenet_folder_of_no_known_layout(good: dict, tmp_path: Path) -> None:
    root = tmp_path / "mini"
    for split, classes in {"train": ("a", "b"), "test": ("b", "c")}.items():
        for name in classes:
            (root / split / name).mkdir(parents=True)
    good["datasets"]["mini_imagenet"] = {"root": str(root)}
    problem = next(p for p in validate(good, REPO) if p.path == "datasets.mini_imagenet.root")
    assert "neither disjoint (the few-shot split) nor those of train/ again" in problem.message
    assert "test/ shares 1 of its 2 classes with train/" in problem.message
    assert "(1) the few-shot split as distributed" in problem.hint and "(2) one folder of class folders" in problem.hint


def test_mini_imagenet_pretrains_on_every_image_so_it_evaluates_only_with_a_test_split(good: dict,
                                                                                       tmp_path: Path) -> None:
    (tmp_path / "mini" / "train").mkdir(parents=True)
    good["datasets"]["mini_imagenet"] = {"root": str(tmp_path / "mini"), "test_fraction": 0}
    assert problems_of(good) == {}
    good["evaluate"]["datasets"].append("mini_imagenet")
    assert problems_of(good) == {"evaluate.datasets": "mini_imagenet has no test split: every image pretrains "
                                                      "(test_fraction 0)"}
    (tmp_path / "mini" / "test").mkdir()  # a split of the images with its own test/
    assert problems_of(good) == {}
    good["datasets"]["mini_imagenet"]["test_fraction"] = 0.2
    (tmp_path / "mini" / "test").rmdir()
    assert problems_of(good) == {}
    good["datasets"]["digits"]["test_fraction"] = 0  # digits always needs its test split
    assert problems_of(good) == {"datasets.digits.test_fraction": "must be > 0, got 0"}


def test_unknown_key_and_reference(good: dict) -> None:
    good["partitions"]["fl-iid"]["alfa"] = 1
    good["graphs"]["complete"]["partition"] = "nope"
    problems = problems_of(good)
    assert problems["partitions.fl-iid.alfa"] == "unknown key"
    assert problems["graphs.complete.partition"] == "'nope' is not defined in 'partitions'"


def test_every_problem_reported_at_once(good: dict) -> None:
    bad = copy.deepcopy(good)
    bad["partitions"]["fl-label"]["alpha"] = -1
    bad["graphs"]["general-5"]["topology"] = "ring"
    assert len(validate(bad, REPO)) == 2


def test_cli_exit_status_and_message(good: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good["partitions"]["fl-label"]["alpha"] = 0
    bad_file = tmp_path / "bad.yaml"
    bad_file.write_text(yaml.safe_dump(good))
    assert main(["validate", str(bad_file)]) == 2
    err = capsys.readouterr().err
    assert "partitions.fl-label.alpha: must be > 0, got 0" in err
    assert "hint:" in err
    assert main(["validate", str(REPO / "params.yaml")]) == 0


def test_unreadable_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("partitions: [unclosed\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(broken)
    with pytest.raises(ParamsError, match="no such params file"):
        load_params(tmp_path / "missing.yaml")


def test_image_folder_decoded_at_another_size_than_pretraining(good: dict, tmp_path: Path) -> None:
    (tmp_path / "mini" / "train").mkdir(parents=True)
    good["datasets"] = {"mini_imagenet": {"root": str(tmp_path / "mini")}}
    good["pretrain"]["dataset"], good["pretrain"]["image_size"] = "mini_imagenet", 224
    for partition in good["partitions"].values():
        partition["dataset"] = "mini_imagenet"
    problems = problems_of(good)
    assert problems.get("pretrain.image_size") == ("224 px, but datasets.mini_imagenet.image_size decodes "
                                                   "mini_imagenet at 84 px")
    good["datasets"]["mini_imagenet"]["image_size"] = 224
    assert "pretrain.image_size" not in problems_of(good)


def test_feature_augment_keys(good: dict) -> None:
    good["partitions"]["fl-feature"]["augment"] = {"brightness_max": 0.3, "hue": 0.1}
    assert problems_of(good) == {"partitions.fl-feature.augment.hue": "unknown key"}


def test_registry_names_match_the_validator() -> None:
    from dssl.config.lookups import backbone_families
    from dssl.config.sections import evaluate, training
    from dssl.config.backbones import BACKBONE_SPECS
    from dssl.config.protocols import PROTOCOL_SPECS
    from dssl.models.vit import POOLS

    families = backbone_families()
    assert sorted(families) == BACKBONE_SPECS.names()
    assert all(BACKBONE_SPECS[name].family == family for name, family in families.items())
    assert evaluate.PROTOCOL_NAMES == set(PROTOCOL_SPECS.names())
    assert evaluate.VIT_POOLS == POOLS
    from dssl.federation.local import OPTIMIZERS, SCHEDULES

    assert training.OPTIMIZER_NAMES == set(OPTIMIZERS) and training.SCHEDULE_NAMES == set(SCHEDULES)


def test_a_strategy_entry_may_carry_its_own_optimizer_recipe(good: dict) -> None:
    from dssl.pipeline.pretrain import optimizer_config, train_schedule

    recipe = {"name": "adam", "base_lr": 1.0e-3, "weight_decay": 1.0e-6}
    good["strategies"]["fedavg"]["train"] = {"rounds": 3, "batch_size": 64, "optimizer": recipe}
    assert problems_of(good) == {}
    model = next(iter(good["models"]))
    assert optimizer_config(good, model, "fedavg") == recipe
    assert optimizer_config(good, model) == good["pretrain"]["optimizers"]["cnn"]
    assert train_schedule(good, "fl", "fedavg")["batch_size"] == 64
    good["strategies"]["fedavg"]["train"]["optimizer"] = {"name": "lamb", "base_lr": 0.0, "schedule": "step"}
    assert problems_of(good) == {"strategies.fedavg.train.optimizer.name": "unknown value 'lamb'",
                                 "strategies.fedavg.train.optimizer.base_lr": "must be > 0, got 0.0",
                                 "strategies.fedavg.train.optimizer.schedule": "unknown value 'step'"}


def test_vit_pool_is_one_of_the_vit_features(good: dict) -> None:
    good["evaluate"]["vit_pool"] = "mean"
    assert problems_of(good)["evaluate.vit_pool"] == "unknown value 'mean'"
    good["evaluate"]["vit_pool"] = "avg"
    assert "evaluate.vit_pool" not in problems_of(good)


def test_model_hyper_parameters_are_checked_before_any_stage_runs(good: dict) -> None:
    good["models"]["mae-vit"]["hparams"] = {"mask_ratoi": 0.5, "norm_pix_loss": "yes", "decoder_dim": 64}
    good["models"]["simsiam-cnn"]["hparams"] = {"predictor": 1}
    problems = {p.path: str(p) for p in validate(good, REPO)}
    assert "unknown key" in problems["models.mae-vit.hparams.mask_ratoi"]
    assert "mask_ratio" in problems["models.mae-vit.hparams.mask_ratoi"]   # the hint lists the accepted names
    assert "must be true or false, got 'yes'" in problems["models.mae-vit.hparams.norm_pix_loss"]
    assert "models.mae-vit.hparams.decoder_dim" not in problems
    assert "must be true or false, got 1" in problems["models.simsiam-cnn.hparams.predictor"]


def test_strategy_entries_are_checked_against_the_strategy_registry(good: dict) -> None:
    good["strategies"]["mar"] = {"name": "fedmar", "gama_max": 0.1}
    good["strategies"]["dmar"] = {"name": "decmar", "mixing": "gossip", "order": "later"}
    good["strategies"]["nameless"] = {"mixing": "uniform"}
    problems = {p.path: str(p) for p in validate(good, REPO)}
    assert "unknown key" in problems["strategies.mar.gama_max"]
    assert "allowed keys: aggregation, alignment, gamma_max, gamma_min, horizon, keep_local, mixing, name, " \
           "order, sigma, train, z_summary" in problems["strategies.mar.gama_max"]
    assert "unknown value 'gossip'" in problems["strategies.dmar.mixing"]
    assert "push_sum" in problems["strategies.dmar.mixing"]
    assert "unknown value 'later'" in problems["strategies.dmar.order"]
    assert problems["strategies.nameless.name"].startswith("strategies.nameless.name: missing")


def test_grid_strategies_run_in_their_framework(good: dict) -> None:
    good["strategies"].update(dmar={"name": "decmar"}, ema={"name": "fedema"},
                              mixed={"name": "fedavg", "mixing": "uniform"})
    good["pretrain"]["fl"]["grids"]["table1"]["strategies"] = ["dmar", "mixed"]
    good["pretrain"]["decl"]["grids"]["fig2a"]["strategies"] = ["ema"]
    problems = problems_of(good)
    assert problems["pretrain.fl.grids.table1.strategies[0]"] == "strategy 'dmar' (decmar) runs in decl, not fl"
    assert problems["pretrain.fl.grids.table1.strategies[1]"] == ("strategy 'mixed' sets ['mixing'], "
                                                                  "which only DecL uses")
    assert problems["pretrain.decl.grids.fig2a.strategies[0]"] == "strategy 'ema' (fedema) runs in fl, not decl"


def test_old_training_keys_are_rejected(good: dict) -> None:
    good["pretrain"]["fl"]["train"]["aggregation"] = "uniform"
    good["pretrain"]["decl"]["train"]["mixing"] = "uniform"
    problems = problems_of(good)
    assert problems["pretrain.fl.train.aggregation"] == "unknown key"
    assert problems["pretrain.decl.train.mixing"] == "unknown key"


def test_training_sections(good: dict) -> None:
    good["models"]["simsiam-cnn"]["method"] = "dino"
    good["pretrain"]["fl"]["grids"]["table1"]["partitions"].append("nope")
    good["pretrain"]["fl"]["grids"]["table1"]["strategies"] = ["fedprox"]
    good["pretrain"]["fl"]["train"]["clients_per_round"] = 11
    good["pretrain"]["decl"]["grids"]["fig2a"]["graphs"] = ["uniform-3", "ring"]
    good["pretrain"]["decl"]["grids"]["fig2a"]["mixing"] = "uniform"
    good["strategies"]["decl-uniform"]["mixing"] = "gossip"
    good["evaluate"]["protocols"]["fl"] = ["svm"]
    problems = problems_of(good)
    assert problems["models.simsiam-cnn.method"] == "unknown value 'dino'"
    assert problems["pretrain.fl.grids.table1.partitions[3]"] == "'nope' is not defined in 'partitions'"
    assert problems["pretrain.fl.grids.table1.strategies[0]"] == "'fedprox' is not defined in 'strategies'"
    assert problems["pretrain.fl.train.clients_per_round"] == "11 > the 10 clients of partition 'fl-feature'"
    assert "'ring' is not defined" in problems["pretrain.decl.grids.fig2a.graphs[1]"]
    assert problems["pretrain.decl.grids.fig2a.mixing"] == "unknown key"
    assert problems["strategies.decl-uniform.mixing"] == "unknown value 'gossip'"
    assert problems["evaluate.protocols.fl[0]"] == "'svm' is not defined in 'protocols'"


def test_seeds_are_a_list_of_distinct_non_negative_integers(good: dict) -> None:
    good["seeds"] = [0, -1, 0, "a"]
    problems = problems_of(good)
    assert problems["seeds[1]"] == "must be an integer >= 0, got -1"
    assert problems["seeds[3]"] == "must be an integer >= 0, got 'a'"
    assert problems["seeds"] == "holds a seed twice"
    del good["seeds"]
    assert problems_of(good)["seeds"] == "must be a non-empty list of integers"


def test_a_per_run_seed_inside_a_training_section_is_rejected(good: dict) -> None:
    good["pretrain"]["fl"]["train"]["seed"] = 0  # seeds come from the top-level list
    assert "pretrain.fl.train.seed" in problems_of(good)


def test_entry_names_are_safe_params_keys(good: dict) -> None:
    """A '.' in a name would be read by DVC as a nested params key (strategies.fedmar-g0.1 -> ...g0 -> 1)."""
    good["strategies"]["fedmar-g0.1"] = {"name": "fedmar"}
    good["models"]["mae vit"] = {"method": "mae", "backbone": "vit_small"}
    problems = problems_of(good)
    assert "may hold only letters, digits, '-' and '_'" in problems["strategies.fedmar-g0.1"]
    assert "may hold only letters" in problems["models.mae vit"]


def test_strategy_entries_may_override_the_training_schedule(good: dict) -> None:
    from dssl.pipeline.pretrain import train_schedule

    good["strategies"]["fedmar-long"] = {"name": "fedmar", "train": {"rounds": 40, "local_epochs": 2}}
    good["pretrain"]["fl"]["grids"]["table8"]["strategies"].append("fedmar-long")
    assert problems_of(good) == {}
    schedule = train_schedule(good, "fl", "fedmar-long")
    assert schedule == {**good["pretrain"]["fl"]["train"], "rounds": 40, "local_epochs": 2}
    assert train_schedule(good, "fl", "fedmar") == good["pretrain"]["fl"]["train"]


def test_schedule_overrides_are_checked_per_framework(good: dict) -> None:
    good["strategies"]["fedavg"]["train"] = {"rounds": 0, "epochs": 3}
    good["strategies"]["decl-uniform"]["train"] = {"clients_per_round": 4}
    good["strategies"]["fedmar"]["train"] = {"clients_per_round": 11}
    problems = problems_of(good)
    assert problems["strategies.fedavg.train.epochs"] == "unknown key"
    assert problems["strategies.fedavg.train.rounds"] == "must be >= 1, got 0"
    assert "which decl training does not have" in problems["pretrain.decl.grids.fig2a.strategies[0]"]
    assert problems["strategies.fedmar.train.clients_per_round"].startswith("11 > the 10 clients")


def test_weight_distance_section_is_checked_against_the_fl_grids_and_partitions(good: dict) -> None:
    good["weight_distance"]["clients"] = [0, 12]
    good["weight_distance"]["grids"]["extra"] = {"models": ["mae-cnn"], "partitions": ["fl-2class"],
                                                 "strategies": ["fedavg"]}
    good["weight_distance"]["train"] = {"epochs": 3}   # the schedule is pretrain.local's
    problems = problems_of(good)
    assert problems["weight_distance.clients"] == "[0, 12] names a client beyond the 5 clients of partition 'fl-2class'"
    assert problems["weight_distance"] == "cell mae-cnn / fl-2class / fedavg is not an FL cell of pretrain.fl.grids"
    assert problems["pretrain.local.grids"] == "mae-cnn / fl-2class has no stand-alone cell"
    assert problems["weight_distance.train"] == "unknown key"
    good["weight_distance"]["clients"] = [3]
    assert "at least two client indices" in problems_of(good)["weight_distance.clients"]


def test_weight_distance_clients_must_be_trained_alone(good: dict) -> None:
    """Table 5 compares stand-alone clients: each must be among pretrain.local.clients of its partition."""
    good["weight_distance"]["clients"] = [0, 5]
    assert problems_of(good)["weight_distance.clients"] == ("[0, 5]: pretrain.local.clients.fl-label does not "
                                                             "train [5]")
    del good["pretrain"]["local"]["clients"]   # without a choice every client of the partition trains
    assert "weight_distance.clients" not in problems_of(good)


def test_local_section_names_partitions_clients_and_schedule(good: dict) -> None:
    local = good["pretrain"]["local"]
    local["clients"] = {"fl-2class": [0, 7], "nowhere": [0]}
    local["train"]["rounds"] = 2
    local["grids"]["paper-b"]["strategies"] = ["fedssl"]
    local["grids"]["paper-b"]["partitions"] = ["decl-label", "fl-cifar"]
    problems = problems_of(good)
    assert problems["pretrain.local.clients.fl-2class"] == ("[0, 7] names a client beyond the 5 clients of "
                                                            "partition 'fl-2class'")
    assert problems["pretrain.local.clients.nowhere"] == "'nowhere' is not defined in 'partitions'"
    assert problems["pretrain.local.train.rounds"] == "unknown key"
    assert problems["pretrain.local.grids.paper-b.strategies"] == "unknown key"
    assert problems["pretrain.local.grids.paper-b.partitions[1]"] == "'fl-cifar' is not defined in 'partitions'"


@pytest.mark.parametrize("name", ["params.yaml", "configs/ci.yaml", "configs/paper.yaml", "configs/paper_b.yaml",
                                  "configs/paper_b_cifar100.yaml"])
def test_params_files_survive_dvcs_yaml_round_trip(name: str) -> None:
    """`dvc exp run -S key=value` rewrites the params file with DVC's own YAML round trip, which drops
    the quotes of flow-style values; a flow mapping of "model:strategy" specs would come back unreadable.
    Every params file must read back equal after that round trip."""
    from dvc.utils.serialize import dumps_yaml, loads_yaml, parse_yaml_for_update

    text = (REPO / name).read_text()
    rewritten = dumps_yaml(parse_yaml_for_update(text, name))
    assert loads_yaml(rewritten) == yaml.safe_load(text)   # read back as DVC reads params


def test_verdict_records_must_exist_before_the_report_compares_them(good: dict, tmp_path: Path) -> None:
    good["report"]["verdicts_elsewhere"] = {"avx2-kernels": "reports/verdicts/avx2-kernels", "bad": 3}
    problems = problems_of(good, tmp_path)
    assert problems["report.verdicts_elsewhere.avx2-kernels"] == \
        "reports/verdicts/avx2-kernels/source.json does not exist"
    assert problems["report.verdicts_elsewhere.bad"] == "must be a folder path, got 3"
    (tmp_path / "reports/verdicts/avx2-kernels").mkdir(parents=True)
    (tmp_path / "reports/verdicts/avx2-kernels/source.json").write_text("{}")
    assert "report.verdicts_elsewhere.avx2-kernels" not in problems_of(good, tmp_path)

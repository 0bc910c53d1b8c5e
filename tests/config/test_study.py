"""``config.study``: params.yaml read once into frozen objects. The merged schedule of a strategy entry, a
model's family and hyper-parameters, the optimizer recipe, read-only objects, and the schedule every FL and
DecL cell's stage builds equal to the one the study gives, entry by entry."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from dssl.config.grids import cell_seeds, grid_cells
from dssl.config.params import read_params
from dssl.config.study import ModelSpec, StrategyEntry, Study, frozen, thawed

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def params() -> dict:
    return read_params(REPO / "params.yaml")


@pytest.fixture(scope="module")
def study(params: dict) -> Study:
    return Study.from_params(params)


def test_an_entry_without_a_train_override_trains_the_framework_schedule(params: dict, study: Study) -> None:
    assert "train" not in params["strategies"]["fedmar"]
    assert study.schedule("fl", "fedmar") == params["pretrain"]["fl"]["train"]
    assert study.schedule("fl") == params["pretrain"]["fl"]["train"]
    assert study.schedule("decl", "decmar") == params["pretrain"]["decl"]["train"]
    assert study.schedule_key("fl", "rounds", "fedmar") == "pretrain.fl.train.rounds"


def test_an_entry_train_override_replaces_only_its_keys(params: dict, study: Study) -> None:
    fl = params["pretrain"]["fl"]["train"]
    assert params["strategies"]["fedavg-r120"]["train"] == {"rounds": 120}
    assert study.schedule("fl", "fedavg-r120") == {**fl, "rounds": 120}
    assert fl["rounds"] != 120   # the override changes something
    assert study.schedule_key("fl", "rounds", "fedavg-r120") == "strategies.fedavg-r120.train.rounds"
    assert study.schedule_key("fl", "batch_size", "fedavg-r120") == "pretrain.fl.train.batch_size"
    assert params["pretrain"]["fl"]["train"] == fl   # nothing written back into params


def test_a_model_has_its_backbone_family_and_own_hparams(params: dict, study: Study) -> None:
    mae = study.models["mae-vit"]
    assert (mae.name, mae.method, mae.backbone, mae.family) == ("mae-vit", "mae", "vit_small", "vit")
    assert dict(mae.hparams) == params["models"]["mae-vit"]["hparams"]
    assert study.models["simsiam-cnn"].family == "cnn"
    assert dict(study.models["simsiam-cnn"].hparams) == {}
    assert ModelSpec.from_params(params, "mae-vit") == mae


def test_method_hparams_put_the_model_over_the_dataset_view_defaults(params: dict) -> None:
    from dssl.pipeline.pretrain import method_hparams

    assert method_hparams(params, "mae-vit") == {"flip_p": 0.0, "mask_ratio": 0.5, "norm_pix_loss": True}
    changed = copy.deepcopy(params)
    changed["models"]["mae-vit"]["hparams"]["flip_p"] = 0.5
    assert method_hparams(changed, "mae-vit")["flip_p"] == 0.5


def test_the_optimizer_recipe_is_the_family_one_unless_the_entry_gives_its_own(params: dict) -> None:
    recipes = params["pretrain"]["optimizers"]
    study = Study.from_params(params)
    assert thawed(study.optimizer("mae-vit", "fedmar")) == recipes["vit"]
    assert thawed(study.optimizer("mae-vit")) == recipes["vit"]
    assert study.optimizer("simsiam-cnn", "fedavg-r120") == recipes["cnn"]
    own = {"name": "sgd", "base_lr": 0.03, "momentum": 0.9, "weight_decay": 0.0005}
    changed = copy.deepcopy(params)
    changed["strategies"]["fedavg-r120"]["train"]["optimizer"] = own
    changed_study = Study.from_params(changed)
    assert changed_study.optimizer("mae-vit", "fedavg-r120") == own
    assert thawed(changed_study.optimizer("mae-vit", "fedavg")) == recipes["vit"]


def test_a_strategy_entry_keeps_its_options_apart_from_the_entry_keys(params: dict, study: Study) -> None:
    entry = study.strategies["t2-orchestra"]
    assert (entry.name, entry.registry) == ("t2-orchestra", "orchestra")
    assert dict(entry.options) == {"server_steps": 100}
    assert dict(entry.train) == {} and entry.optimizer is None   # the FL default schedule
    assert dict(entry.round_options) == {}
    assert dict(study.strategies["fedavg-r10"].train) == {"rounds": 10}
    decl = study.strategies["decl-push-sum"]
    assert dict(decl.options) == {} and dict(decl.train) == {}
    assert dict(decl.round_options) == {"mixing": "push_sum", "order": "mix_then_train"}
    assert StrategyEntry.from_params(params, "decl-push-sum") == decl


def test_a_stage_builds_the_strategy_from_the_entry_layout(params: dict, study: Study) -> None:
    from dssl.pipeline.pretrain import build_strategy

    for entry in (study.strategies["decl-push-sum"], params["strategies"]["decl-push-sum"]):
        strategy, round_options = build_strategy(entry)
        assert strategy.name == "fedavg"
        assert round_options == {"mixing": "push_sum", "order": "mix_then_train"}
    strategy, round_options = build_strategy(study.strategies["t2-orchestra"])
    assert (strategy.name, strategy.hparams["server_steps"], round_options) == ("orchestra", 100, {})


def test_the_objects_are_frozen(study: Study) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        study.models["mae-vit"].family = "cnn"   # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        study.strategies["fedavg"].registry = "fedu"   # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        study.image_size = 1   # type: ignore[misc]
    with pytest.raises(TypeError):
        study.models["other"] = study.models["mae-vit"]   # type: ignore[index]
    with pytest.raises(TypeError):
        study.models["mae-vit"].hparams["mask_ratio"] = 0.9   # type: ignore[index]
    with pytest.raises(TypeError):
        study.schedule("fl", "fedavg-r120")["rounds"] = 1   # type: ignore[index]
    with pytest.raises(TypeError):
        study.trains["fl"]["rounds"] = 1   # type: ignore[index]
    assert isinstance(study.optimizers["vit"]["betas"], tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        study.cells("fl")[0].seeds = ()   # type: ignore[misc]


def test_thawed_gives_back_what_the_yaml_held(params: dict) -> None:
    assert thawed(frozen(params)) == params
    assert type(thawed(frozen(params))["seeds"]) is list


def _fl_schedule_as_written_before(params: dict, strategy: str, framework: str = "fl") -> dict:
    """The merge as params.yaml documents it, written out here independently of ``config.study``."""
    return {**params["pretrain"][framework]["train"], **(params["strategies"][strategy].get("train") or {})}


def test_every_cell_schedule_the_stage_builds_equals_the_study(params: dict, study: Study) -> None:
    from dssl.federation import DecLConfig, FLConfig
    from dssl.pipeline.pretrain import simulator_config, train_schedule

    configs = {"fl": FLConfig, "decl": DecLConfig}
    assert [c.model for c in study.cells("fl")] and [c.model for c in study.cells("decl")]
    for framework, config in configs.items():
        assert [(c.model, c.place, c.strategy) for c in study.cells(framework)] == grid_cells(params, framework)
        for cell in study.cells(framework):
            built = train_schedule(params, framework, cell.strategy)   # what _fl_seed / _decl_seed hand the simulator
            assert built == thawed(study.schedule(framework, cell.strategy))
            assert built == _fl_schedule_as_written_before(params, cell.strategy, framework)
            assert (config.from_dict(simulator_config(built))
                    == config.from_dict(simulator_config(_fl_schedule_as_written_before(params, cell.strategy,
                                                                                         framework))))
            assert list(cell.seeds) == cell_seeds(params, framework, (cell.model, cell.place, cell.strategy))


def test_the_study_is_torch_free() -> None:
    code = ("import sys; from dssl.config.params import read_params; from dssl.config.study import Study; "
            "Study.from_params(read_params('params.yaml')).cells('fl'); assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)

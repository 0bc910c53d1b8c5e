"""Valid ranges, declared once where an option is declared (``dssl.config.ranges``): each bad value is refused
by ``dssl validate`` at its key path with exit status 2, each boundary inside a range is accepted, and every
params file of the repository still validates."""

from __future__ import annotations

import copy
import math
from dataclasses import fields
from pathlib import Path

import pytest

from dssl.config import options as option_classes
from dssl.config.methods import METHOD_SPECS
from dssl.config.params import read_params, validate
from dssl.config.ranges import NumericOption, Range, declared_options, number_problem
from dssl.config.strategies import STRATEGY_SPECS
from dssl.data.dataset_specs import DATASET_SPECS
from dssl.data.partition_specs import PARTITION_SCHEMES, AugmentOptions, PartitionEntry
from dssl.evaluation.configs import FewShotConfig, FineTuneConfig, KnnConfig, LinearProbeConfig
from dssl.topology.topology_specs import TOPOLOGY_SPECS, GraphEntry

from conftest import set_at, validate_error_lines

REPO = Path(__file__).resolve().parents[2]
SPEC_CLASSES = sorted({spec.options for registry in (DATASET_SPECS, PARTITION_SCHEMES, TOPOLOGY_SPECS)
                       for spec in registry.values()} | {PartitionEntry, AugmentOptions, GraphEntry},
                      key=lambda cls: cls.__name__)
METHOD_CONFIGS = [METHOD_SPECS[name].config for name in METHOD_SPECS.names()]
STRATEGY_CONFIGS = [STRATEGY_SPECS[name].config for name in STRATEGY_SPECS.names()]
OPTION_CLASSES = [option_classes.FLSchedule, option_classes.DecLSchedule, option_classes.CentralSchedule,
                  option_classes.OptimizerRecipe, option_classes.PretrainOptions, option_classes.ImprovedGraphOptions,
                  option_classes.TheoryOptions, option_classes.TheoryImprovementOptions,
                  LinearProbeConfig, FewShotConfig, KnnConfig, FineTuneConfig, *SPEC_CLASSES, *METHOD_CONFIGS,
                  *STRATEGY_CONFIGS]


def _model_of(params: dict, method: str) -> str:
    return next(name for name, spec in params["models"].items() if spec["method"] == method)


def _strategy_of(params: dict, *names: str) -> str:
    return next(name for name, spec in params["strategies"].items() if spec["name"] in names)


def _mask_ratio(params: dict) -> str:
    model = _model_of(params, "mae")
    params["models"][model].setdefault("hparams", {})["mask_ratio"] = 2.0
    return f"models.{model}.hparams.mask_ratio"


def _image_size(params: dict) -> str:
    params["pretrain"]["image_size"] = 100000
    return "pretrain.image_size"


def _gamma_max(params: dict) -> str:
    entry = _strategy_of(params, "fedmar", "decmar")
    params["strategies"][entry]["gamma_max"] = -5
    return f"strategies.{entry}.gamma_max"


def _batch_size(params: dict) -> str:
    params["pretrain"]["fl"]["train"]["batch_size"] = 1000000000
    return "pretrain.fl.train.batch_size"


def _seeds(params: dict) -> str:
    params["seeds"] = "abc"
    return "seeds"


@pytest.mark.parametrize("spoil", [_mask_ratio, _image_size, _gamma_max, _batch_size, _seeds],
                         ids=["mask_ratio", "image_size", "gamma_max", "batch_size", "seeds"])
def test_the_cli_refuses_a_bad_value_at_its_key_path(good: dict, tmp_path: Path, spoil) -> None:
    path = spoil(good)
    lines = validate_error_lines(good, tmp_path)
    assert len(lines) == 1 and f"{path}: must be" in lines[0], lines


@pytest.mark.parametrize("seeds, message", [
    ("abc", "must be a non-empty list of integers"), (3, "must be a non-empty list of integers"),
    ([], "must be a non-empty list of integers"), ([1.5], "must be an integer >= 0, got 1.5"),
    ([True], "must be an integer >= 0, got True"), ([-1], "must be an integer >= 0, got -1"),
    ([0, 0], "holds a seed twice"),
])
@pytest.mark.parametrize("where", ["seeds", "pretrain.fl.grids.table1.seeds", "pretrain.local.grids.table5.seeds"])
def test_a_bad_seed_list_is_one_problem_at_its_key_path(good: dict, seeds, message: str, where: str) -> None:
    holder = good
    *parents, key = where.split(".")
    for part in parents:
        holder = holder[part]
    holder[key] = seeds
    problems = validate(good, REPO)
    assert len(problems) == 1, [str(p) for p in problems]
    assert problems[0].path.startswith(where) and problems[0].message == message


def test_features_seed_must_be_a_seed(good: dict) -> None:
    good["features"]["seed"] = "x"
    assert [str(p) for p in validate(good, REPO)] == [
        "features.seed: must be an integer >= 0, got 'x'  (hint: one of the seeds the FL cells train)"]


@pytest.mark.parametrize("where, value, message", [
    ("partitions.fl-label.alpha", 0, "must be > 0, got 0"),
    ("partitions.fl-label.clients", 0, "must be >= 1, got 0"),
    ("graphs.uniform-3.seed", -1, "must be >= 0, got -1"),
    ("pretrain.decl.train.rounds", 1.5, "must be an integer, got 1.5"),
    ("pretrain.central.train.epochs", 0, "must be >= 1, got 0"),
    ("pretrain.optimizers.vit.betas", [0.9, 1.5], "must be < 1, got 1.5"),
    ("evaluate.knn.k", 0, "must be >= 1, got 0"),
    ("evaluate.finetune.per_family.vit.layer_decay", 1.5, "must be <= 1, got 1.5"),
    ("theory.mask_ratio", 1.0, "must be < 1, got 1.0"),
    ("theory.improvement.k", -1, "must be >= 0, got -1"),
])
def test_section_options_are_checked_against_their_declared_ranges(good: dict, where: str, value, message) -> None:
    set_at(good, where, value)
    problems = {p.path: p.message for p in validate(good, REPO)}
    assert problems.get(where) == message, problems


# ------------------------------------------------------------------------------------------------
# every declared range: just outside refused, the boundary inside accepted


def _declared() -> list[tuple[str, NumericOption, object]]:
    """(name, option, check) of every declared range; ``check(value)`` gives the validator's problem."""
    found = []
    for cls in OPTION_CLASSES:
        for key, declared in declared_options(cls).items():
            found.append((f"{cls.__name__}.{key}", declared, lambda v, o=declared: number_problem(v, o)))
    return found


DECLARED = _declared()


def _step(bound: float, integer: bool, towards: float) -> float:
    return bound + (1 if towards > bound else -1) if integer else math.nextafter(bound, towards)


def _edges(option: NumericOption) -> tuple[list[float], list[float]]:
    """(values just outside, boundary values inside) of an option's range."""
    rng, outside, inside = option.range, [], []
    for bound, is_open, out in ((rng.low, rng.low_open, -math.inf), (rng.high, rng.high_open, math.inf)):
        if bound is None:
            continue
        inward = -out
        outside.append(bound if is_open else _step(bound, option.integer, out))
        inside.append(_step(bound, option.integer, inward) if is_open else bound)
    return outside, inside


@pytest.mark.parametrize("name, option, check", DECLARED, ids=[d[0] for d in DECLARED])
def test_each_range_refuses_just_outside_and_accepts_its_boundaries(name: str, option: NumericOption, check) -> None:
    outside, inside = _edges(option)
    assert outside, f"{name}: a range needs at least one bound"
    for value in outside:
        assert check(value) is not None, (name, value)
    for value in inside:
        assert check(value) is None, (name, value, check(value))
    assert check("1") is not None and check(True) is not None
    if option.integer and option.range.contains(2):
        assert check(2.5) is not None, name   # a whole number, whatever the range


def test_every_numeric_option_declares_its_range() -> None:
    """Methods, strategies and protocols: a number without a range would pass any value to the run."""
    for cls in OPTION_CLASSES:
        ranged = declared_options(cls)
        for field in fields(cls):
            if any(t in str(field.type) for t in ("int", "float")):
                assert field.name in ranged, (cls.__name__, field.name)


def test_range_messages() -> None:
    unit = Range(0.0, 1.0, high_open=True)
    assert str(unit) == "[0, 1)" and str(Range(1)) == ">= 1" and str(Range(0, low_open=True)) == "> 0"
    assert unit.problem(1.0) == "must be < 1, got 1.0" and unit.problem(-0.5) == "must be >= 0, got -0.5"
    with pytest.raises(ValueError, match="empty range"):
        Range(2, 1)
    declared = NumericOption(True, True, Range(1, 64))
    assert number_problem(None, declared) is None and number_problem(65, declared) == "must be <= 64, got 65"
    assert number_problem([0.5, 2.0], NumericOption(False, False, unit)) == "must be < 1, got 2.0"


# ------------------------------------------------------------------------------------------------
# the repository's params files


@pytest.mark.parametrize("name", ["params.yaml", "configs/ci.yaml", "configs/paper.yaml", "configs/paper_b.yaml",
                                  "configs/paper_b_cifar100.yaml"])
def test_every_params_file_validates(name: str, tmp_path: Path) -> None:
    params = copy.deepcopy(read_params(REPO / name))
    folder = tmp_path / "images" / "train" / "class0"   # a layout both image-folder datasets accept
    folder.mkdir(parents=True)
    for dataset in ("mini_imagenet", "imagenet"):
        if dataset in params.get("datasets", {}):
            params["datasets"][dataset]["root"] = str(tmp_path / "images")
    assert [str(p) for p in validate(params, REPO)] == []

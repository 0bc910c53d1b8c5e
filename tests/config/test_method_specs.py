"""The SSL methods declared once, as torch-free specs (``dssl.config.methods``): each spec loads its class, its
defaults build a method, and a bad value is refused by the params validator at its key path and by the config
when built in code."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from dssl.config.methods import METHOD_SPECS
from dssl.config.params import read_params, validate
from dssl.config.ranges import declared_options
from dssl.methods import SSLMethod, create_method
from dssl.registry import UnknownNameError
from dssl.specs import choices, option_defaults, option_keys

from conftest import validate_error_lines

REPO = Path(__file__).resolve().parents[2]
NAMES = METHOD_SPECS.names()
BACKBONE = {"mae": "vit_small"}   # every other method trains a CNN's feature map or pooled features


@pytest.fixture
def good() -> dict:
    return read_params(REPO / "params.yaml")


def _outside(name: str) -> tuple[str, object]:
    """An option of method ``name`` and a value just above its range (or one its choices lack)."""
    config = METHOD_SPECS[name].config
    for key, option in declared_options(config).items():
        if option.range.high is not None:
            return key, option.range.high + 1
    key = next(k for k in option_keys(config) if choices(config, k) is not None)
    return key, "none-of-these"


def test_the_names_are_the_spec_modules_and_listing_them_imports_no_method() -> None:
    code = ("import sys; from dssl.config.methods import METHOD_SPECS as M; "
            "[M[n] for n in M.names()]; print(M.names()); "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('dssl.methods')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [str(NAMES), "[]"]
    assert NAMES == ["byol", "mae", "mae_cnn", "moco", "orchestra", "simclr", "simsiam"]


@pytest.mark.parametrize("name", NAMES)
def test_each_spec_loads_its_class_and_its_defaults_build_a_method(name: str) -> None:
    spec = METHOD_SPECS[name]
    assert spec.module == f"dssl.{spec.code.partition(':')[0]}" and not spec.code.startswith("dssl.")
    cls = spec.load()
    assert issubclass(cls, SSLMethod) and cls.name == name
    assert spec.config.__doc__ and "arxiv.org/abs/" in sys.modules[spec.config.__module__].__doc__
    method = create_method(name, BACKBONE.get(name, "cnn_small"), 16, 1)
    assert type(method) is cls and method.name == name
    # hparams: every option once, resolved (a derived width is a number), the rest as declared
    assert list(method.hparams) == list(option_keys(spec.config))
    for key, default in option_defaults(spec.config).items():
        resolved = method.hparams[key]
        assert resolved is not None and (default is None or resolved == default), (key, resolved)


@pytest.mark.parametrize("name", NAMES)
def test_a_bad_value_is_refused_by_the_validator_at_its_key_path_and_by_the_config(good: dict, name: str) -> None:
    key, value = _outside(name)
    good["models"]["probe"] = {"method": name, "backbone": BACKBONE.get(name, "cnn_small"), "hparams": {key: value}}
    problems = {p.path: str(p) for p in validate(good, REPO)}
    assert list(problems) == [f"models.probe.hparams.{key}"], problems
    with pytest.raises(ValueError, match=f"{key}: "):
        METHOD_SPECS[name].options({key: value})
    with pytest.raises(ValueError, match=key):
        create_method(name, BACKBONE.get(name, "cnn_small"), 16, 1, **{key: value})


def test_mask_ratio_two_exits_2_naming_its_key(good: dict, tmp_path: Path) -> None:
    good["models"]["mae-vit"]["hparams"]["mask_ratio"] = 2.0
    good["report"].pop("verdicts_elsewhere", None)   # records of other runs, relative to the repository
    lines = validate_error_lines(good, tmp_path)
    assert any("models.mae-vit.hparams.mask_ratio: must be < 1, got 2.0" in line for line in lines), lines


def test_an_unknown_hyper_parameter_is_refused(good: dict) -> None:
    good["models"]["mae-vit"]["hparams"]["mask_rate"] = 0.5
    problems = {p.path: str(p) for p in validate(good, REPO)}
    assert list(problems) == ["models.mae-vit.hparams.mask_rate"]
    problem = problems["models.mae-vit.hparams.mask_rate"]
    assert "unknown key" in problem and "mask_ratio" in problem   # the hint lists the accepted keys
    with pytest.raises(ValueError, match=r"method 'mae' has no option 'mask_rate'; its options: mask_ratio"):
        create_method("mae", "vit_small", 16, 1, mask_rate=0.5)
    with pytest.raises(UnknownNameError, match="known: byol, mae, mae_cnn"):
        create_method("dino", "cnn_small", 16, 1)


def test_a_check_across_options_is_the_configs_and_the_validator_reports_it(good: dict) -> None:
    good["models"]["moco-v2-cnn"]["hparams"] = {"version": "v1", "head_bn": True}
    problems = {p.path: str(p) for p in validate(good, REPO)}
    assert list(problems) == ["models.moco-v2-cnn.hparams"] and "head_bn" in problems["models.moco-v2-cnn.hparams"]
    with pytest.raises(ValueError, match="num_local_centroids <= memory_size"):
        METHOD_SPECS["orchestra"].options({"memory_size": 8, "num_local_centroids": 16})


def test_a_config_is_frozen_and_its_choices_are_the_codes() -> None:
    config = METHOD_SPECS["simsiam"].options({"heads": "fedssl"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.heads = "simsiam"   # type: ignore[misc]
    from dssl.methods.simsiam import AUGMENTATIONS

    assert set(choices(type(config), "augmentation")) == set(AUGMENTATIONS)
    assert choices(METHOD_SPECS["moco"].config, "version") == ("v1", "v2")

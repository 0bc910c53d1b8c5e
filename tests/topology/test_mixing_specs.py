"""The mixing rules are declared once, as torch-free specs (``dssl.config.mixing``): listing and looking up a
rule imports neither torch nor the rule's code; each spec loads its rule; ``push_sum`` alone is column-stochastic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dssl.config.mixing import MIXING_SPECS, MixingSpec
from dssl.registry import UnknownNameError
from dssl.specs import NoOptions
from dssl.topology.mixing import DEFAULT_RULE, mixing_matrix

REPO = Path(__file__).resolve().parents[2]
RULES = ["data_size", "degree_normalised", "metropolis_hastings", "push_sum", "uniform"]


def test_the_rules_are_the_spec_modules_and_the_default_is_one() -> None:
    assert MIXING_SPECS.names() == RULES
    assert DEFAULT_RULE in MIXING_SPECS
    with pytest.raises(UnknownNameError, match="known: data_size"):
        MIXING_SPECS["nope"]


@pytest.mark.parametrize("rule", RULES)
def test_each_spec_loads_its_rule_and_names_its_modules(rule: str) -> None:
    spec = MIXING_SPECS[rule]
    assert isinstance(spec, MixingSpec) and spec.name == rule and spec.config is NoOptions
    assert spec.options() == NoOptions()
    assert callable(spec.load())
    assert spec.module == f"dssl.topology.mixing_rules.{rule}"
    assert MIXING_SPECS.modules_of(rule) == [f"dssl.config.mixing.{rule}", spec.module]


def test_push_sum_alone_is_column_stochastic() -> None:
    assert [r for r in RULES if MIXING_SPECS[r].column_stochastic] == ["push_sum"]
    path = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=bool)
    for rule in RULES:
        matrix = mixing_matrix(path, rule, np.array([1, 2, 3]))
        axis = 0 if MIXING_SPECS[rule].column_stochastic else 1
        np.testing.assert_allclose(matrix.sum(axis=axis), 1.0)
        assert not np.allclose(matrix.sum(axis=1 - axis), 1.0) or rule == "metropolis_hastings"


def test_the_specs_import_neither_torch_nor_numpy_nor_a_rule() -> None:
    code = ("import sys; from dssl.config.mixing import MIXING_SPECS; list(MIXING_SPECS.values()); "
            "assert all(MIXING_SPECS[n].name == n for n in MIXING_SPECS.names()); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy') or 'mixing_rules' in m]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)

"""The alignment terms are declared once, as torch-free specs (``dssl.config.alignments``): each spec loads its term,
the three MMD terms share one module, ``a_mmd_code`` alone takes tokens (what every spec registry shares:
tests/config/test_spec_registries.py)."""

from __future__ import annotations


import pytest
import torch

from dssl.config.alignments import ALIGNMENT_SPECS, AlignmentSpec
from dssl.federation.alignment import alignment_loss, uses_tokens
from dssl.registry import UnknownNameError
from dssl.specs import NoOptions

TERMS = ["a_mmd", "a_mmd_code", "a_mmd_median", "cosine", "mmd"]


def test_the_terms_are_the_spec_modules() -> None:
    assert ALIGNMENT_SPECS.names() == TERMS
    for lookup in (ALIGNMENT_SPECS.__getitem__, uses_tokens):
        with pytest.raises(UnknownNameError, match="known: a_mmd"):
            lookup("nope")


@pytest.mark.parametrize("name", TERMS)
def test_each_spec_loads_a_term_of_its_layout(name: str) -> None:
    spec = ALIGNMENT_SPECS[name]
    assert isinstance(spec, AlignmentSpec) and spec.name == name and spec.config is NoOptions
    assert callable(spec.load())
    assert ALIGNMENT_SPECS.modules_of(name) == [f"dssl.config.alignments.{name}", spec.module]
    shape = (4, 3, 5) if spec.tokens else (4, 5)
    z, z_bar = torch.randn(shape, generator=torch.Generator().manual_seed(0)), torch.ones(shape)
    assert alignment_loss(name, z, z_bar).shape == ()


def test_three_mmd_terms_share_one_module_and_a_mmd_code_alone_takes_tokens() -> None:
    assert {ALIGNMENT_SPECS[n].module for n in ("a_mmd", "a_mmd_median", "mmd")} == {"dssl.federation.alignments.mmd"}
    assert [n for n in TERMS if uses_tokens(n)] == [n for n in TERMS if ALIGNMENT_SPECS[n].tokens] == ["a_mmd_code"]

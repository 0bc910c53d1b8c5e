"""The alignment terms are declared once, as torch-free specs (``dssl.config.alignments``): listing and looking up
a term imports neither torch nor the term's code; each spec loads its term; ``a_mmd_code`` alone takes tokens."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dssl.config.alignments import ALIGNMENT_SPECS, AlignmentSpec
from dssl.federation.alignment import alignment_loss, uses_tokens
from dssl.registry import UnknownNameError
from dssl.specs import NoOptions

REPO = Path(__file__).resolve().parents[2]
SPEC_FOLDER = REPO / "src" / "dssl" / "config" / "alignments"
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


def test_spec_modules_import_only_the_spec_package_and_name_no_full_module() -> None:
    """Standard library and ``dssl.specs``: the validator imports them in every stage. The code is named relative
    to ``dssl`` (a full module name in a string counts as an import in a stage's code lineage)."""
    for path in sorted(SPEC_FOLDER.glob("[!_]*.py")):
        tree = ast.parse(path.read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert {m for m in imported if m and m.startswith("dssl")} <= {"dssl.config.alignments", "dssl.specs"}, path
        assert not {m for m in imported if m and m.split(".")[0] in ("torch", "numpy")}, path
        strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        assert not any("dssl." in s for s in strings), path.name


def test_the_specs_import_neither_torch_nor_a_term() -> None:
    code = ("import sys; from dssl.config.alignments import ALIGNMENT_SPECS; list(ALIGNMENT_SPECS.values()); "
            "assert [n for n in ALIGNMENT_SPECS.names() if ALIGNMENT_SPECS[n].tokens] == ['a_mmd_code']; "
            "bad = [m for m in sys.modules if m.split('.')[0] == 'torch' or 'federation' in m]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)

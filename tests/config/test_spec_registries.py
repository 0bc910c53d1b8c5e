"""Every registry a stage runs from is a ``SpecRegistry`` (``dssl.registry.SPEC_PACKAGES``): its names are its spec
modules, each spec names its code relative to ``dssl`` and loads it, and reading every spec of every registry (what
the params validator does in each stage) imports neither torch nor any entry's implementation, so a stage's code
lineage holds its own cell's entries alone."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dssl.registry import SPEC_PACKAGES, SpecRegistry, UnknownNameError
from dssl.specs import EntrySpec

REPO = Path(__file__).resolve().parents[2]
KINDS = sorted(SPEC_PACKAGES)
FULL_NAME = re.compile(r"dssl(\.\w+)+(:\w+)?")   # a module (or "module:attribute") named from the top


def _folder(kind: str) -> Path:
    return REPO / "src" / "dssl" / Path(*SPEC_PACKAGES[kind].split("."))


@pytest.mark.parametrize("kind", KINDS)
def test_the_names_are_the_spec_modules_and_each_spec_loads_its_code(kind: str) -> None:
    registry = SpecRegistry.of(kind)
    assert registry is SpecRegistry.of(kind)   # one instance per kind
    stems = sorted(p.stem for p in _folder(kind).glob("*.py") if not p.stem.startswith("_"))
    assert registry.names() == list(registry) == stems and len(registry) == len(stems) > 0
    for name in stems:
        spec = registry[name]
        assert isinstance(spec, EntrySpec) and spec.name == name and spec.kind != EntrySpec.kind
        assert not spec.code.startswith("dssl.") and spec.module == f"dssl.{spec.code.partition(':')[0]}"
        assert registry.modules_of(name) == [f"dssl.{SPEC_PACKAGES[kind]}.{name}", spec.module]
        assert callable(spec.load())
        assert type(spec.options()) is spec.config   # the declared defaults pass their own checks
    with pytest.raises(UnknownNameError, match=f"unknown {registry.kind} 'nope'; known: {stems[0]}"):
        registry["nope"]


# A protocol's params entry is coerced by ``coerce_config`` (lists to tuples, the values its name fixes), whose
# unknown keys are a TypeError of their own (tests/evaluation); the other kinds share ``EntrySpec.options``.
@pytest.mark.parametrize("kind", [kind for kind in KINDS if kind != "protocol"])
def test_an_unknown_option_names_the_entry_and_the_declared_options(kind: str) -> None:
    registry = SpecRegistry.of(kind)
    spec = registry[registry.names()[0]]
    with pytest.raises(ValueError, match=f"{spec.kind} '{spec.name}' has no option 'nope'; its options: "):
        spec.options({"nope": 1})


@pytest.mark.parametrize("kind", KINDS)
def test_spec_modules_name_no_full_module_and_import_no_torch(kind: str) -> None:
    """A full module name in a string counts as an import in a stage's code lineage (``dssl.pipeline.codedeps``);
    the validator imports the spec modules in every stage."""
    for path in sorted(_folder(kind).glob("*.py")):
        tree = ast.parse(path.read_text())
        strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        assert not [s for s in strings if FULL_NAME.fullmatch(s)], path.name
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in imported if m and m.split(".")[0] in ("torch", "timm")}, path.name


def test_reading_every_spec_imports_neither_torch_nor_an_implementation() -> None:
    code = ("import sys; from dssl.registry import SPEC_PACKAGES, SpecRegistry; "
            "specs = [s for kind in SPEC_PACKAGES for s in SpecRegistry.of(kind).values()]; "
            "print(len(specs)); print(sorted({m for m in sys.modules if m.split('.')[0] == 'torch'} "
            "| {s.module for s in specs if s.module in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    count, loaded = out.splitlines()
    assert int(count) == sum(len(SpecRegistry.of(kind)) for kind in KINDS) and loaded == "[]"

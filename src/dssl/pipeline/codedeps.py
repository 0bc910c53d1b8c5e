"""A stage's code dependencies, computed: the import closure of its entry module inside ``dssl``.

Every ``import`` statement of a module counts, wherever it stands (module level, inside a function,
under ``TYPE_CHECKING``): stages import lazily to start fast, and a lazily imported module still
shapes the result. ``from dssl.a import b`` names the submodule ``dssl.a.b`` when that file exists,
else the package ``dssl.a``; importing a submodule also runs its packages' ``__init__`` files. A string
constant that is the full name of a ``dssl`` module counts too: a lazy import by name
(``importlib.import_module("dssl.evaluation.finetune")``). The spec registries (``dssl.registry.SpecRegistry``),
which every stage reads through the params validator, name their implementations relative to ``dssl`` for that
reason.
Non-Python files of a package folder (package data such as the paper's numbers) belong to every
closure that imports a module of that folder.

The closure is written to dvc.yaml as compactly as it stays exact: a folder whose every file is in
the closure is listed as the folder (DVC then records one hash for it), other files one by one.
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Iterable

PACKAGE = "dssl"
IGNORED_DIRS = {"__pycache__"}  # as in .dvcignore: byte-code is not a dependency


def package_root() -> Path:
    """The folder that holds the ``dssl`` package (src/)."""
    return Path(__file__).resolve().parents[2]


def module_file(module: str, root: Path) -> Path | None:
    """The file of a ``dssl`` module (``__init__.py`` for a package), or None if there is none."""
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _resolve_relative(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    parts = module.split(".")
    keep = len(parts) - node.level + (1 if is_package else 0)
    return ".".join(parts[:keep] + ([node.module] if node.module else []))


def _imported_names(module: str, path: Path) -> set[str]:
    """Every module name an import statement of ``path`` may load (candidates, checked later)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_relative(module, node, path.name == "__init__.py") if node.level else node.module
            if base:
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(PACKAGE + "."):
            names.add(node.value)  # a lazy import by name; non-modules are dropped by the caller
    return {n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")}


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


@lru_cache(maxsize=None)
def import_closure(entry: str, root: Path | None = None) -> frozenset[str]:
    """Names of every ``dssl`` module the entry module may import, directly or transitively."""
    root = root or package_root()
    seen: set[str] = set()
    todo = [entry]
    while todo:
        module = todo.pop()
        for name in _with_parents(module):
            path = module_file(name, root)
            if path is None or name in seen:
                continue
            seen.add(name)
            todo.extend(_imported_names(name, path))
    return frozenset(seen)


def closure_files(entry: str | Iterable[str], root: Path | None = None) -> list[Path]:
    """The files of the closure of one entry module or the union of several (a component running several
    registry entries), sources and package data, absolute, sorted."""
    root = root or package_root()
    entries = [entry] if isinstance(entry, str) else list(entry)
    files = {module_file(name, root) for one in entries for name in import_closure(one, root)}
    folders = {f.parent for f in files}
    data = {p for folder in folders for p in folder.iterdir() if p.is_file() and p.suffix != ".py"}
    return sorted(files | data)


def code_digest(path: Path) -> str:
    """md5 of what a file does. A Python module counts as its syntax tree without docstrings, written back
    as source (``ast.unparse``): comments, docstrings, blank lines, quotes and line wraps change nothing, so
    they re-run no stage. Any other file (package data) counts by its bytes."""
    data = path.read_bytes()
    if path.suffix == ".py":
        tree = ast.parse(data, filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                node.body = _without_docstring(node.body)
        data = ast.unparse(tree).encode()
    return hashlib.md5(data).hexdigest()


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:] or [ast.Pass()]
    return body


def _folder_files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file() and not IGNORED_DIRS & set(p.relative_to(folder).parts)}


def compact(files: list[Path], root: Path) -> list[Path]:
    """Replace each folder whose every file (recursively) is in ``files`` by the folder itself."""
    remaining = set(files)
    chosen: list[Path] = []
    for folder in sorted({f.parent for f in files}, key=lambda p: len(p.parts)):
        if folder != root and folder.is_relative_to(root) and not any(folder.is_relative_to(c) for c in chosen):
            inside = _folder_files(folder)
            if inside and inside <= set(files):
                chosen.append(folder)
                remaining -= inside
    return sorted(chosen + [f for f in remaining if not any(f.is_relative_to(c) for c in chosen)])


def source_root(project: Path) -> Path:
    """The project's own ``src/`` when it has one (the sources DVC hashes; from a pipeline folder
    runs/<profile>/, the project's above it), else the installed one."""
    here = Path(project).resolve()
    own = next((folder / "src" for folder in (here, *here.parents) if (folder / "src" / PACKAGE).is_dir()), None)
    return own if own is not None else package_root()


def code_dependencies(entry: str | Iterable[str], project: Path) -> list[str]:
    """The closure of the entry module (or modules) as project-relative paths for dvc.yaml and the Snakefile."""
    project = project.resolve()
    root = source_root(project)
    package = root / PACKAGE
    paths = compact(closure_files(entry, root), package)
    return [p.relative_to(project).as_posix() if p.is_relative_to(project) else str(p) for p in paths]


def expand_folders(paths: list[str], project: Path) -> list[str]:
    """Folder dependencies as the files DVC hashes in them (Snakemake compares files, not folders)."""
    files: list[str] = []
    for path in paths:
        folder = Path(project) / path
        if folder.is_dir():
            files += sorted(p.relative_to(project).as_posix() for p in _folder_files(folder))
        else:
            files.append(path)
    return files

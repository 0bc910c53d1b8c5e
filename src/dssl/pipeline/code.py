"""Stage ``code``: the code manifests, one per stage kind and one per code component a cell runs.

Why a stage: DVC re-reads and rewrites the whole dvc.lock around every stage it runs, so a lock that
lists each stage's 20-30 source files costs seconds per stage. Instead this stage depends on the
package folder (one entry) and writes small manifests; every other stage depends on a few of them:
- ``reports/lineage/code/<kind>.json``: the shared machinery of a stage kind, the import closure of its
  entry module. The registries import their entries lazily (``dssl.registry.Registry``), so this holds
  no method, backbone or strategy module.
- ``reports/lineage/code/<registry>/<name>.json`` (``method/simsiam``, ``backbone/vit_small``,
  ``strategy/fedema``, ``mixing/push_sum``): the import closure of the module implementing that registry
  entry; a component of several entries (``protocol/knn+linear_probe_10pct``, ``strategy/fedmar+alignment/
  cosine``: ``catalogue.component_terms``) hashes the union of their closures.
A pretraining cell depends on its kind's manifest and on those of its method, backbone and strategy (with
the alignment a FedMAR / DecMAR entry names), a DecL cell also on its mixing rule's; an evaluation on its
kind's, its backbone's and its protocols'; the graph stages on every mixing rule's (a graph is saved with
each rule's matrix). Each file counts by what it does (``codedeps.code_digest``:
a module's syntax tree without docstrings), so a comment or a docstring rewrites every manifest with
the same bytes and DVC re-runs nothing after this stage; an edit of ``strategies/fedema.py`` changes
``strategy/fedema.json`` alone, and with it the FedEMA cells and what reads them. The manifests double as
the lineage record of which code produced a number.
"""

from __future__ import annotations

import json
from pathlib import Path

from dssl.pipeline.common import Stage, atomic_file


def code_manifest(module: str | list[str], project: Path, digests: dict[Path, str] | None = None) -> dict:
    """``{"entry": module, "files": {path: digest}}`` for the import closure of the module (or the union over
    a list of modules, then ``entry`` lists them), each path relative to the folder holding the sources
    (``src/dssl/...``), from the project or a pipeline folder in it. ``digests``: the files' digests so far,
    shared by the manifests of one run (the closures overlap: each file is parsed once, not once per manifest)."""
    from dssl.pipeline.codedeps import closure_files, code_digest, source_root

    root = source_root(project.resolve())
    files = closure_files(module, root)
    entry = module[0] if isinstance(module, list) and len(module) == 1 else module
    digests = {} if digests is None else digests
    for f in files:
        if f not in digests:
            digests[f] = code_digest(f)
    return {"entry": entry, "files": {f.relative_to(root.parent).as_posix(): digests[f] for f in files}}


def manifests(catalogue) -> dict[str, dict]:
    """Every manifest the catalogue's stages depend on: ``{name: manifest}`` with ``name`` a stage kind or
    a ``<registry>/<entry>`` component (``manifest_path(name)`` is where it is written)."""
    from dssl.pipeline.catalogue import component_modules, used_components

    entries: dict[str, str | list[str]] = {kind.name: kind.module for kind in catalogue.kinds_with_stages()
                                           if kind.name != "code"}
    entries.update({c: component_modules(c) for c in used_components(catalogue.params)})
    digests: dict[Path, str] = {}
    return {name: {"kind": name, **code_manifest(module, catalogue.project, digests)}
            for name, module in entries.items()}


def run(params_path: Path | str) -> Path:
    stage = Stage("code", "", params_path)
    from dssl.pipeline.catalogue import Catalogue, manifest_path

    written = []
    for name, manifest in manifests(Catalogue(stage.params, stage.root)).items():
        out = stage.root / manifest_path(name)
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(out) as tmp:
            tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        written.append(out)
    folder = Path(manifest_path("code")).parent
    remove_stale_manifests(stage.root / folder, written)
    stage.log({}, {"manifests": float(len(written))}, artifacts=[], inputs=[])
    return folder


def remove_stale_manifests(folder: Path, written: list[Path]) -> None:
    """Delete the manifests in ``folder`` this run did not write: those of a component no stage of the params
    runs any more (a protocol set an evaluation no longer runs). DVC no longer tracks them, but they would stay,
    and a verdict record's code digest (``pipeline.verdicts.code_digest``: every manifest in the folder) would
    then differ from a fresh run's of the same params and code."""
    keep = {path.resolve() for path in written}
    for path in list(folder.rglob("*.json")):   # listed first: deleting while walking
        if path.resolve() not in keep:
            path.unlink()

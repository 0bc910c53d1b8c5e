"""Stage ``code``: one manifest per stage kind, the md5 of every file of its code (import closure).

Why a stage: DVC re-reads and rewrites the whole dvc.lock around every stage it runs, so a lock that
lists each stage's 20-30 source files costs seconds per stage. Instead this stage depends on the
package folder (one entry) and writes ``reports/lineage/code/<kind>.json``; every other stage depends
on its kind's manifest only. A manifest's bytes change exactly when a file of that kind's closure
changes, so DVC re-runs exactly the stages whose entry imports an edited module, after this stage has
refreshed the manifests (``dvc repro`` runs it first). The manifests double as the lineage record of
which code produced a number.
"""

from __future__ import annotations

import json
from pathlib import Path

from dssl.pipeline.common import Stage, atomic_file


def code_manifest(module: str, project: Path) -> dict:
    """``{"entry": module, "files": {path: md5}}`` for the module's import closure, each path relative
    to the folder holding the sources (``src/dssl/...``), from the project or a pipeline folder in it."""
    from dssl.pipeline.codedeps import closure_files, source_root
    from dssl.tracking.lineage import file_md5

    root = source_root(project.resolve())
    files = closure_files(module, root)
    return {"entry": module, "files": {f.relative_to(root.parent).as_posix(): file_md5(f) for f in files}}


def run(params_path: Path | str) -> Path:
    stage = Stage("code", "", params_path)
    from dssl.pipeline.catalogue import Catalogue, manifest_path

    catalogue = Catalogue(stage.params, stage.root)
    written = []
    for kind in catalogue.kinds_with_stages():
        if kind.name == "code":
            continue
        manifest = code_manifest(kind.module, stage.root)
        out = manifest_path(kind.name)
        with atomic_file(stage.root / out) as tmp:
            tmp.write_text(json.dumps({"kind": kind.name, **manifest}, indent=1, sort_keys=True) + "\n")
        written.append(out)
    stage.log({}, {"kinds": float(len(written))}, artifacts=[], inputs=[])
    return Path(written[0]).parent if written else Path(".")

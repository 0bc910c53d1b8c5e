"""Where a stage may run: a stage of the params file's grid, in that file's pipeline folder.

``dssl <kind> <args>`` checks both before any work (``cli``), so a mistyped argument or a stage started
in the wrong folder stops with one line instead of a KeyError deep in the stage, or, worse, a run that
writes its outputs, dvc.lock entries and tracking runs over another profile's: the project's params.yaml
runs in the project, any other params file in ``runs/<profile>/`` (``layout.pipeline_folder``), where
its dvc.yaml files are. The check lives here, not in ``common.Stage``, so that no stage's code
dependency includes the catalogue (an edit to it would re-run every stage).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from dssl.config.params import project_of
from dssl.pipeline.catalogue import StageKind
from dssl.pipeline.dvcfile import TOP_LEVEL, Pipeline, folder_owner


class PlacementError(Exception):
    """A stage that the params file does not define, or asked to run outside its pipeline folder."""


def check_stage(kind: StageKind, values: list[str], params_path: Path, params: dict) -> None:
    """Raise ``PlacementError`` (one line: what is wrong, where or what to run instead) unless ``kind``
    with ``values`` is a stage of ``params`` and the working directory is its pipeline folder. A working
    directory in no project (a scratch folder) holds nothing of a project to overwrite: not checked."""
    key = "-".join(values)
    keys = ["-".join(fields[a] for a in kind.args) for fields in kind.grid(params)]
    if key not in keys:
        raise PlacementError(_unknown(kind.name, key, keys, params_path))
    problem = _folder_problem(params, params_path, " ".join(["dssl", kind.name, *values]))
    if problem:
        raise PlacementError(f"{kind.name}{'@' if key else ''}{key}{problem}")


def _unknown(kind: str, key: str, keys: list[str], params_path: Path) -> str:
    asked = f"{kind}@{key}" if key else kind
    if not keys:
        return f"{asked}: {params_path} runs no {kind} stage (its grid is empty)"
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.5)
    return (f"{asked}: {params_path} defines no such stage; of its {len(keys)} {kind} stage(s), "
            f"{'the closest' if close else 'e.g.'}: {', '.join(close or keys[:3])} (arguments joined by '-')")


def _folder_problem(params: dict, params_path: Path, command: str) -> str | None:
    """Why the working directory is not where the stage may write (None: it is), after the stage's name."""
    here = Path.cwd().resolve()
    project = project_of(here)
    if project is None:
        return None
    try:
        pipeline = Pipeline.of(params, project, params_path.resolve())
    except ValueError as err:   # a profile that cannot name a folder
        return f": {err}"
    folder = (project / pipeline.folder).resolve()
    owner = folder_owner(params, project, params_path.resolve())
    if owner:
        return (f": its pipeline folder {pipeline.folder}/ holds the pipeline of {owner} (the same profile, "
                f"{params.get('profile')!r}); give {params_path} a profile of its own")
    ready = pipeline.embedded or (folder / TOP_LEVEL).is_file()
    if here != folder:
        go = f"cd {os.path.relpath(folder, here)} && {command} --params {pipeline.params_ref}"
        where = "the project root" if pipeline.embedded else f"its pipeline folder {pipeline.folder}/"
        go = go if ready else f"dssl dag write --params {params_path} && {go}"
        return f" of {params_path} writes only into {where}, not into {here}: run it there (`{go}`)"
    if not ready:
        return (f": its pipeline folder {pipeline.folder}/ has no {TOP_LEVEL} yet, so nothing would record the run: "
                f"first `dssl dag write --params {pipeline.params_file}` in {project}")
    return None

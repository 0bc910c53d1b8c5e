"""The DAG as each engine sees it, in one canonical form, so dvc.yaml and the Snakefile cannot drift.

A stage is (name, command, dependencies, outputs) with the name spelled ``<kind>@<entry>`` as DVC
expands ``foreach`` stages; Snakemake jobs are named ``<rule>@<wildcard value>`` the same way.
Params dependencies are DVC-only bookkeeping (Snakemake tracks params through the command and the
config), so they are compared separately: each DVC stage must depend on exactly its own entry.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator


@dataclass(frozen=True, order=True)
class StageSpec:
    name: str
    cmd: str
    deps: tuple[str, ...]
    outs: tuple[str, ...]


@contextmanager
def _isolated(path: Path) -> Iterator[None]:
    """Run in ``path`` and undo the environment changes a Snakefile makes when it is parsed."""
    previous, environ = Path.cwd(), dict(os.environ)
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)
        os.environ.clear()
        os.environ.update(environ)


def dvc_stages(root: Path, params_file: Path | str = "params.yaml") -> tuple[list[StageSpec], dict[str, list[str]]]:
    """Expanded DVC stages of a params file's pipeline (paths relative to its pipeline folder) and, per
    stage, its params dependencies (``section.key`` strings)."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    from dssl.config.params import read_params
    from dssl.pipeline.dvcfile import Pipeline, render_files

    params = read_params(Path(root) / params_file)
    pipeline = Pipeline.of(params, root, params_file)
    files = set(render_files(params, root, params_file))
    specs, deps_params = [], {}
    manifests = _code_manifests(pipeline, params)
    with Repo(str(root)) as repo:
        for stage in repo.index.stages:
            if Path(stage.dvcfile.path).resolve().relative_to(Path(root).resolve()).as_posix() not in files:
                continue
            file_deps = [_relative(d.def_path) for d in stage.deps if not isinstance(d, ParamsDependency)]
            file_deps = [f for d in file_deps for f in manifests.get(d, [d])]
            deps = [f for d in file_deps for f in _source_files(pipeline, d)]
            specs.append(StageSpec(
                stage.name,
                stage.cmd,
                tuple(sorted(set(deps))),
                tuple(sorted(_relative(o.def_path) for o in stage.outs)),
            ))
            deps_params[stage.name] = sorted(
                key for d in stage.deps if isinstance(d, ParamsDependency) for key in d.params
            )
    return sorted(_expand_output_parents(specs)), deps_params


def _code_manifests(pipeline, params: dict) -> dict[str, list[str]]:
    """A code manifest stands for the files it hashes (Snakemake depends on those files directly: it
    compares modification times, and has no lock file to keep small)."""
    from dssl.pipeline.catalogue import KINDS, Catalogue, manifest_path, used_components

    catalogue = Catalogue(params, pipeline.project)
    kinds = {manifest_path(kind.name): [pipeline.from_folder(c) for c in catalogue.code(kind)]
             for kind in KINDS if kind.name != "code"}
    components = {manifest_path(c): [pipeline.from_folder(p) for p in catalogue.component_code(c)]
                  for c in used_components(params)}
    return {**kinds, **components}


def _expand_output_parents(specs: list[StageSpec]) -> list[StageSpec]:
    """A dependency on a folder that holds other stages' outputs stands for those outputs (DVC links
    the stages through it; the Snakefile lists the files)."""
    outs = sorted(o for spec in specs for o in spec.outs)

    def expand(dep: str) -> list[str]:
        inside = [o for o in outs if o.startswith(dep + "/")]
        return inside if inside and dep not in outs else [dep]

    return [StageSpec(s.name, s.cmd, tuple(sorted(f for d in s.deps for f in expand(d))), s.outs) for s in specs]


@contextmanager
def _snakemake_workflow(root: Path, configfile: Path | None = None) -> Iterator:
    """The Snakefile's workflow with its whole DAG built (every output forced), as a job would see it."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        ResourceSettings,
        StorageSettings,
    )

    config = ConfigSettings(configfiles=[Path(root) / configfile] if configfile else [])
    with _isolated(root), SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=config,
            storage_settings=StorageSettings(),
            snakefile=root / "Snakefile",  # run in root (_isolated); no workdir override, so the
        )                                  # Snakefile's own `workdir:` (a pipeline folder) applies
        dag_api = workflow_api.dag(dag_settings=DAGSettings(forceall=True))
        workflow = dag_api.workflow_api._workflow  # no public API exposes the jobs of a DAG
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        yield workflow


def snakemake_stages(root: Path, configfile: Path | None = None) -> list[StageSpec]:
    """Every job of the Snakefile's DAG (all outputs forced), in the same canonical form; ``configfile``
    (relative to ``root``) replaces params.yaml as with ``snakemake --configfile``."""
    with _snakemake_workflow(root, configfile) as workflow:
        specs = [_job_spec(job) for job in workflow.dag.jobs if job.rule.name != "all"]
    return sorted(specs)


def snakemake_local_rules(root: Path, configfile: Path | None = None) -> set[str]:
    """The rules of the DAG that run where Snakemake runs (the head node) under a cluster executor: the
    Snakefile's ``localrules`` (``Workflow.is_local`` answers for the executor at hand, local here)."""
    with _snakemake_workflow(root, configfile) as workflow:
        return {job.rule.name for job in workflow.dag.jobs if job.rule.name in workflow._localrules}


def _job_spec(job) -> StageSpec:
    wildcard = "-".join(str(v) for v in job.wildcards_dict.values())
    return StageSpec(
        f"{job.rule.name}@{wildcard}" if wildcard else job.rule.name,
        " ".join(job.format_wildcards(job.rule.shellcmd, params=job.params, rule=job.rule.name).split()),
        tuple(sorted({_relative(str(f)) for f in job.input})),
        tuple(sorted(_relative(str(f)) for f in job.output)),
    )


def _source_files(pipeline, dep: str) -> list[str]:
    """A source folder dependency stands for its files (the Snakefile lists them one by one)."""
    in_project = os.path.normpath(pipeline.folder / dep)
    if not in_project.startswith("src/"):
        return [dep]
    from dssl.pipeline.codedeps import expand_folders

    return [pipeline.from_folder(f) for f in expand_folders([in_project], pipeline.project)]


def _relative(path: str) -> str:
    return Path(os.path.normpath(path)).as_posix().rstrip("/")

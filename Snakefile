# The pipeline DAG for Snakemake, built from the same stage catalogue as dvc.yaml
# (src/dssl/pipeline/catalogue.py): one rule per stage kind, its wildcards the kind's arguments, the
# same commands, inputs (data and computed code dependencies) and outputs as DVC's stages
# (tests/pipeline/test_dag_equality.py checks it). Run locally with `snakemake --cores all`, on a
# cluster with `--profile profiles/slurm`; then `dvc commit -f $(dssl dag files)` records the outputs.
# A different params file: `snakemake --configfile configs/paper.yaml` (it replaces params.yaml) runs in
# that file's pipeline folder, runs/<profile>/, after `dssl dag write --params configs/paper.yaml`
# rendered its dvc.yaml files there; `dvc commit -f -R runs/<profile>` then records it (docs/cluster.md).
import os
import signal
from pathlib import Path

from dssl.config.checker import ParamsError
from dssl.config.params import validate
from dssl.pipeline.catalogue import KINDS, Catalogue, wildcard_pattern
from dssl.pipeline.codedeps import expand_folders
from dssl.pipeline.dvcfile import Pipeline, folder_owner
from snakemake.exceptions import WorkflowError

if "SLURM_JOB_ID" in os.environ:
    # SLURM's --signal=USR1@<seconds> (profiles/slurm) reaches every process of a job step, Snakemake's
    # own too: Snakemake and the shells it starts ignore it (the ignoring is inherited); the stage
    # catches it, checkpoints and requeues its job (dssl.training.preemption, dssl.pipeline.requeue).
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)

# params.yaml unless --configfile names another file: the two are not merged, the named one replaces it.
if not workflow.overwrite_configfiles:
    configfile: "params.yaml"

PROJECT = Path.cwd()
# The params file every job reads: the last --configfile given, else params.yaml.
PARAMS_FILE = Path(workflow.overwrite_configfiles[-1] if workflow.overwrite_configfiles else "params.yaml").resolve()
_problems = validate(config, PROJECT)
if _problems:
    raise ParamsError(os.path.relpath(PARAMS_FILE), _problems)
PIPELINE = Pipeline.of(config, PROJECT, PARAMS_FILE)
PARAMS = PIPELINE.params_ref  # as the jobs see it from the pipeline folder, where they run
# Stages read it: under Snakemake each job trains its seeds one after another on one core.
os.environ["DSSL_ENGINE"] = "snakemake"
CATALOGUE = Catalogue(config, PROJECT)

if not PIPELINE.embedded:
    _owner = folder_owner(config, PROJECT, PARAMS_FILE)
    if _owner or not (PROJECT / PIPELINE.path("dvc.yaml")).is_file():
        raise WorkflowError(
            f"{PIPELINE.params_file} runs in its pipeline folder {PIPELINE.folder}/, which "
            + (f"holds the pipeline of {_owner} (the same profile): give it a profile of its own"
               if _owner else "has no dvc.yaml yet: run `dssl dag write --params "
               f"{PIPELINE.params_file}` first (DVC records the run there)"))
    workdir: PIPELINE.folder

onstart:
    shell(f"dssl tracking init --params {PARAMS}")

# Light stages run on the head node; training, evaluation and prepare are the cluster's jobs.
workflow.localrules("all", *(kind.name for kind in KINDS if not kind.cluster_job))

rule all:
    input:
        [out for stage in CATALOGUE.stages for out in stage.outputs],


def _code_files(paths):
    """Code dependencies (files and source folders) as the files the pipeline folder sees."""
    return [PIPELINE.from_folder(path) for path in expand_folders(paths, PROJECT)]


def _inputs_of(kind):
    """Input function of a kind's rule: the instance's data inputs, the kind's code files and those of the
    components (method, backbone, strategy) the instance runs, as the pipeline folder sees them."""
    by_key = {stage.key: stage for stage in CATALOGUE.of_kind(kind)}
    code = _code_files(CATALOGUE.code(kind))
    components = {c: _code_files(CATALOGUE.component_code(c)) for s in by_key.values() for c in s.components}

    def inputs(wildcards):
        stage = by_key["-".join(wildcards[arg] for arg in kind.args)]
        return list(dict.fromkeys([*stage.inputs, *code, *(f for c in stage.components for f in components[c])]))
    return inputs


def _arguments_of(kind):
    """The command's positional arguments: the kind's wildcards, in the catalogue's order."""
    return lambda wildcards: " ".join(wildcards[arg] for arg in kind.args)


def _outputs_of(kind):
    """The kind's output templates: ``{arg}`` placeholders are the rule's wildcards."""
    return [directory(t.rstrip("/")) if t.endswith("/") else t for t in kind.outputs(config)]


for _kind in KINDS:
    if not CATALOGUE.of_kind(_kind):
        continue
    rule:
        name: _kind.name
        input: _inputs_of(_kind)
        output: _outputs_of(_kind)
        wildcard_constraints:
            **{arg: wildcard_pattern(s.fields[arg] for s in CATALOGUE.of_kind(_kind)) for arg in _kind.args}
        params:
            args=_arguments_of(_kind),
        threads: 1
        # The shell expression is evaluated when a job runs, after this loop has ended: it may use
        # only what is the same for every rule ({rule}, {params}, PARAMS), never the loop variable.
        shell:
            "dssl {rule} {params.args} --params " + PARAMS

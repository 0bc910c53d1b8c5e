# The pipeline DAG for Snakemake: the same stages, commands, inputs and outputs as dvc.yaml
# (tests/pipeline/test_dag_equality.py keeps the two equal). Run locally with
# `snakemake --cores all`, on a cluster with `--profile profiles/slurm`; then `dvc commit -f` records
# the outputs in dvc.lock. A different params file: `snakemake --configfile configs/paper.yaml`.
import os

from dssl.config.params import ParamsError, validate

configfile: "params.yaml"

# The params file every job reads: the last --configfile given, else params.yaml.
PARAMS = os.path.relpath(workflow.overwrite_configfiles[-1]) if workflow.overwrite_configfiles else "params.yaml"
_problems = validate(config, os.getcwd())
if _problems:
    raise ParamsError(PARAMS, _problems)
os.environ["DSSL_ENGINE"] = "snakemake"

DATASETS = config["datasets"]
PARTITIONS = config["partitions"]
GRAPHS = config.get("graphs") or {}

wildcard_constraints:
    dataset="|".join(DATASETS) or "^$",
    partition="|".join(PARTITIONS) or "^$",
    graph="|".join(GRAPHS) or "^$",

onstart:
    shell(f"dssl tracking init --params {PARAMS}")

localrules: all, prepare, partition, graph

rule all:
    input:
        expand("data/prepared/{dataset}", dataset=DATASETS),
        expand("data/partitions/{partition}", partition=PARTITIONS),
        expand("reports/figures/partitions/{partition}.png", partition=PARTITIONS),
        expand("data/graphs/{graph}/graph.json", graph=GRAPHS),
        expand("reports/figures/graphs/{graph}.png", graph=GRAPHS),

rule prepare:
    input:
        "src/dssl/data/datasets.py",
        "src/dssl/pipeline/prepare.py",
        "src/dssl/pipeline/common.py",
    output:
        directory("data/prepared/{dataset}"),
    shell:
        "dssl prepare {wildcards.dataset} --params " + PARAMS

rule partition:
    input:
        lambda w: f"data/prepared/{PARTITIONS[w.partition]['dataset']}",
        "src/dssl/data/partition.py",
        "src/dssl/pipeline/partition.py",
        "src/dssl/pipeline/common.py",
    output:
        directory("data/partitions/{partition}"),
        "reports/figures/partitions/{partition}.png",
    shell:
        "dssl partition {wildcards.partition} --params " + PARAMS

rule graph:
    input:
        lambda w: f"data/partitions/{GRAPHS[w.graph]['partition']}",
        "src/dssl/topology/graphs.py",
        "src/dssl/topology/mixing.py",
        "src/dssl/reporting/graph_figure.py",
        "src/dssl/pipeline/graph.py",
        "src/dssl/pipeline/common.py",
    output:
        "data/graphs/{graph}/graph.json",
        "reports/figures/graphs/{graph}.png",
    shell:
        "dssl graph {wildcards.graph} --params " + PARAMS

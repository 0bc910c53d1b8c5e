# The pipeline DAG for Snakemake: the same stages, commands, inputs and outputs as dvc.yaml
# (tests/pipeline/test_dag_equality.py keeps the two equal). Run locally with
# `snakemake --cores all`, on a cluster with `--profile profiles/slurm`; then `dvc commit -f` records
# the outputs in dvc.lock. A different params file: `snakemake --configfile configs/paper.yaml`.
import os
from pathlib import Path

from dssl.config.params import ParamsError, validate

# params.yaml unless --configfile names another file: the two are not merged, the named one replaces it.
if not workflow.overwrite_configfiles:
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
IMPROVED = config.get("improved_graphs") or {}
REPORT = config.get("report") or {}
MODELS = config.get("models") or {}
PRETRAIN = config.get("pretrain") or {}
FL = PRETRAIN.get("fl") or {"models": [], "partitions": []}
DECL = PRETRAIN.get("decl") or {"models": [], "graphs": []}
CENTRAL = PRETRAIN.get("central") or {"models": []}
EVALUATE = config.get("evaluate") or {"datasets": [], "random_backbones": [], "protocols": {}}
PROTOCOLS = EVALUATE.get("protocols") or {}


def sources(*paths):
    """Source files a rule depends on; a folder stands for its .py files (as in dvc.yaml)."""
    files = []
    for path in paths:
        files += sorted(str(p) for p in Path(path).rglob("*.py")) if Path(path).is_dir() else [path]
    return files

wildcard_constraints:
    dataset="|".join(DATASETS) or "^$",
    partition="|".join(PARTITIONS) or "^$",
    graph="|".join([*GRAPHS, *IMPROVED]) or "^$",
    model="|".join(MODELS) or "^$",
    protocol="linear_probe|finetune",
    backbone="|".join(EVALUATE.get("random_backbones") or []) or "^$",

onstart:
    shell(f"dssl tracking init --params {PARAMS}")

localrules: all, prepare, partition, graph, graph_improve, report

EVALUATIONS = (
    expand("reports/metrics/fl/{model}/{partition}/{dataset}-{protocol}.json", model=FL["models"],
           partition=FL["partitions"], dataset=EVALUATE["datasets"], protocol=PROTOCOLS.get("fl", []))
    + expand("reports/metrics/decl/{model}/{graph}/{dataset}-{protocol}.json", model=DECL["models"],
             graph=DECL["graphs"], dataset=EVALUATE["datasets"], protocol=PROTOCOLS.get("decl", []))
    + expand("reports/metrics/central/{model}/{dataset}-{protocol}.json", model=CENTRAL["models"],
             dataset=EVALUATE["datasets"], protocol=PROTOCOLS.get("central", []))
    + expand("reports/metrics/random/{backbone}/{dataset}-{protocol}.json",
             backbone=EVALUATE.get("random_backbones") or [], dataset=EVALUATE["datasets"],
             protocol=PROTOCOLS.get("random", []))
)

REPORT_OUTPUTS = (
    ["reports/README.md", "reports/table1.csv", "reports/linear_probe.csv",
     f"reports/figures/fig2a-{REPORT['dataset']}.png"] if REPORT else []
)

rule all:
    input:
        expand("data/prepared/{dataset}", dataset=DATASETS),
        expand("data/partitions/{partition}", partition=PARTITIONS),
        expand("reports/figures/partitions/{partition}.png", partition=PARTITIONS),
        expand("data/graphs/{graph}/graph.json", graph=GRAPHS),
        expand("reports/figures/graphs/{graph}.png", graph=GRAPHS),
        expand("data/graphs/{graph}/graph.json", graph=IMPROVED),
        expand("reports/figures/graphs/{graph}.png", graph=IMPROVED),
        ["reports/theory"] if config.get("theory") else [],
        EVALUATIONS,
        REPORT_OUTPUTS,

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

rule graph_improve:
    input:
        lambda w: f"data/graphs/{IMPROVED[w.graph]['base']}/graph.json",
        sources("src/dssl/topology", "src/dssl/theory", "src/dssl/reporting/graph_figure.py",
                "src/dssl/pipeline/graph_improve.py", "src/dssl/pipeline/graph.py",
                "src/dssl/pipeline/theory.py", "src/dssl/pipeline/common.py"),
    output:
        "data/graphs/{graph}/graph.json",
        "reports/figures/graphs/{graph}.png",
    wildcard_constraints:
        graph="|".join(IMPROVED) or "^$",
    shell:
        "dssl graph_improve {wildcards.graph} --params " + PARAMS

rule theory:
    input:
        expand("data/graphs/{graph}/graph.json", graph=[*GRAPHS, *IMPROVED]),
        sources("src/dssl/theory", "src/dssl/topology", "src/dssl/pipeline/theory.py",
                "src/dssl/pipeline/common.py"),
    output:
        directory("reports/theory"),
    shell:
        "dssl theory --params " + PARAMS

rule graph:
    wildcard_constraints:
        graph="|".join(GRAPHS) or "^$",
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

# Training runs use one thread each (see dssl.pipeline.pretrain.configure_threads), so Snakemake can
# run as many at once as there are cores; on a cluster the profile sets GPUs per rule.
rule pretrain_fl:
    input:
        lambda w: f"data/prepared/{PRETRAIN['dataset']}",
        "data/partitions/{partition}",
        sources("src/dssl/methods", "src/dssl/models", "src/dssl/federation",
                "src/dssl/pipeline/pretrain.py", "src/dssl/pipeline/common.py"),
    output:
        directory("models/fl/{model}/{partition}"),
    shell:
        "dssl pretrain_fl {wildcards.model} {wildcards.partition} --params " + PARAMS

rule pretrain_decl:
    input:
        lambda w: f"data/prepared/{PRETRAIN['dataset']}",
        lambda w: f"data/partitions/{DECL['partition']}",
        "data/graphs/{graph}/graph.json",
        sources("src/dssl/methods", "src/dssl/models", "src/dssl/federation",
                "src/dssl/pipeline/pretrain.py", "src/dssl/pipeline/common.py"),
    output:
        directory("models/decl/{model}/{graph}"),
    shell:
        "dssl pretrain_decl {wildcards.model} {wildcards.graph} --params " + PARAMS

rule pretrain_central:
    input:
        lambda w: f"data/prepared/{PRETRAIN['dataset']}",
        sources("src/dssl/methods", "src/dssl/models", "src/dssl/federation",
                "src/dssl/pipeline/pretrain.py", "src/dssl/pipeline/common.py"),
    output:
        directory("models/central/{model}"),
    shell:
        "dssl pretrain_central {wildcards.model} --params " + PARAMS

rule evaluate_fl:
    input:
        "models/fl/{model}/{partition}",
        "data/prepared/{dataset}",
        sources("src/dssl/evaluation", "src/dssl/pipeline/evaluate.py", "src/dssl/pipeline/common.py"),
    output:
        "reports/metrics/fl/{model}/{partition}/{dataset}-{protocol}.json",
    shell:
        "dssl evaluate_fl {wildcards.model} {wildcards.partition} {wildcards.dataset} {wildcards.protocol} --params " + PARAMS

rule evaluate_decl:
    input:
        "models/decl/{model}/{graph}",
        "data/graphs/{graph}/graph.json",
        "data/prepared/{dataset}",
        sources("src/dssl/evaluation", "src/dssl/pipeline/evaluate.py", "src/dssl/pipeline/common.py"),
    output:
        "reports/metrics/decl/{model}/{graph}/{dataset}-{protocol}.json",
    shell:
        "dssl evaluate_decl {wildcards.model} {wildcards.graph} {wildcards.dataset} {wildcards.protocol} --params " + PARAMS

rule evaluate_central:
    input:
        "models/central/{model}",
        "data/prepared/{dataset}",
        sources("src/dssl/evaluation", "src/dssl/pipeline/evaluate.py", "src/dssl/pipeline/common.py"),
    output:
        "reports/metrics/central/{model}/{dataset}-{protocol}.json",
    shell:
        "dssl evaluate_central {wildcards.model} {wildcards.dataset} {wildcards.protocol} --params " + PARAMS

rule evaluate_random:
    input:
        "data/prepared/{dataset}",
        sources("src/dssl/models", "src/dssl/evaluation", "src/dssl/pipeline/evaluate.py",
                "src/dssl/pipeline/common.py"),
    output:
        "reports/metrics/random/{backbone}/{dataset}-{protocol}.json",
    shell:
        "dssl evaluate_random {wildcards.backbone} {wildcards.dataset} {wildcards.protocol} --params " + PARAMS

rule report:
    input:
        EVALUATIONS,
        "reports/theory",
        sources("src/dssl/reporting", "src/dssl/pipeline/report.py", "src/dssl/pipeline/common.py"),
    output:
        REPORT_OUTPUTS,
    shell:
        "dssl report --params " + PARAMS

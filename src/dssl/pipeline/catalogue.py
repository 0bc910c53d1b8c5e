"""The stage catalogue: one declaration of every stage kind, from which both engines' DAGs come.

A ``StageKind`` names its entry point, the grid it expands over (one instance per combination of
params.yaml names), the params keys, inputs and outputs of an instance, as templates over the
instance's fields (``{model}``, ``{partition}``, ...). From it:
- ``dssl dag write`` renders dvc.yaml (checked in; ``dssl dag check`` and a test fail when stale);
- the Snakefile defines one rule per kind (wildcards = the kind's arguments);
- ``dssl <kind> <args>`` dispatches to the entry point.
Some outputs are, to DVC, metrics (the evaluation results, read by ``dvc metrics``/``dvc exp show``)
or plots (the figures, shown by ``dvc plots``); a kind names them among its outputs, and
``plot_definitions`` declares the data plots over the report's tables. Snakemake sees all of them as
plain outputs.
Code dependencies are never listed here: they are the import closure of the entry module
(``codedeps``). Adding a method, a seed or a grid entry changes params.yaml, not this file.

One stage = one cell of a table: a training or evaluation stage runs every seed of its cell (each
seed its own MLflow run, folder and result file), which keeps the stage count, and with it DVC's
per-stage bookkeeping, independent of the number of seeds.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterable

from dssl.config.grids import feature_cells, reference_seed_keys, seeds_keys, weight_distance_cells
from dssl.config.study import GridCell, Study
from dssl.pipeline.codedeps import PACKAGE, code_dependencies, source_root
from dssl.pipeline.layout import SINGLE_CLIENT_STRATEGY
from dssl.registry import SPEC_PACKAGES, SpecRegistry

Fields = dict[str, str]
Templates = Callable[[dict], list[str]]


def _const(*templates: str) -> Templates:
    return lambda params: list(templates)


@dataclass(frozen=True)
class StageKind:
    """One kind of stage; ``args`` are its CLI arguments and, joined by '-', its instance name."""

    name: str
    entry: str                              # "module:function" under dssl.pipeline
    args: tuple[str, ...]
    help: str
    grid: Callable[[dict], list[Fields]]    # instance fields (args + values the templates look up)
    params: Templates                       # params keys an instance reads
    outputs: Templates                      # a folder output ends with '/'
    inputs: Templates = _const()           # outputs of other stages an instance reads
    training: bool = False                 # trains or evaluates a model: a cluster job with a GPU
    whole_dataset: bool = False            # reads or writes a whole dataset: a cluster job, CPU only
    metrics: Templates = _const()          # outputs DVC declares as metrics (JSON files, or folders of them)
    plots: Templates = _const()            # outputs DVC declares as plots (images)
    components: Templates = _const()       # registry entries whose code an instance runs (``component_terms``)

    @property
    def cluster_job(self) -> bool:
        """Whether a cluster runs it as a job of its own; the other kinds are light enough for the
        head node (Snakemake's ``localrules``)."""
        return self.training or self.whole_dataset

    @property
    def module(self) -> str:
        return f"dssl.pipeline.{self.entry.split(':')[0]}"

    @property
    def function(self) -> str:
        return self.entry.split(":")[1]


@dataclass(frozen=True)
class StageInstance:
    """One stage of the DAG, as both engines run it."""

    kind: StageKind
    fields: Fields = field(hash=False)
    params_keys: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    folders: tuple[str, ...]                # the outputs that are folders
    metrics: tuple[str, ...] = ()           # the outputs that are DVC metrics
    plots: tuple[str, ...] = ()             # the outputs that are DVC plots
    components: tuple[str, ...] = ()        # the registry entries it runs: method, backbone, strategy, ...

    @property
    def key(self) -> str:
        return "-".join(self.fields[a] for a in self.kind.args)

    @property
    def name(self) -> str:
        """``kind@key`` as DVC names foreach stages (Snakemake jobs are matched to it), or ``kind``."""
        return f"{self.kind.name}@{self.key}" if self.kind.args else self.kind.name

    def command(self, params_file: str = "params.yaml") -> str:
        return " ".join(["dssl", self.kind.name, *(self.fields[a] for a in self.kind.args), "--params", params_file])

    def writes(self, path: str) -> bool:
        """Whether ``path`` is one of this stage's outputs or lies inside one."""
        return any(path == out or path.startswith(out + "/") for out in self.outputs)

    def feeds(self, path: str) -> bool:
        """Whether a stage reading ``path`` reads something this stage writes (``path`` may be a folder
        holding one of its outputs)."""
        return self.writes(path) or any(out.startswith(path + "/") for out in self.outputs)


def _fmt(templates: Iterable[str], fields: Fields) -> tuple[str, ...]:
    return tuple(t.format(**fields) for t in templates)


# ------------------------------------------------------------------------------------------- grids


def _study(params: dict) -> Study:
    """The Study of ``params``, read at each grid's call (about a millisecond): a caller may edit its params
    dict between two listings, and each listing must see the dict as it is."""
    return Study.from_params(params)


def _strategy_code(study: Study, entry: str) -> Fields:
    """The code a ``strategies:`` entry runs, as a component after ``strategy/``: its registry name (``t2-fedu``
    -> ``fedu``) and the registry entries its options name, defaults included (``fedmar+alignment/a_mmd``)."""
    spec = study.strategies[entry]
    options = SpecRegistry.of("strategy")[spec.registry].options(dict(spec.options))
    named = [f"{field.metadata['registry']}/{getattr(options, field.name)}" for field in dataclasses.fields(options)
             if "registry" in field.metadata and getattr(options, field.name) is not None]
    return {"strategy_code": "+".join([spec.registry, *named])}


def _mixing_rule(study: Study, entry: str) -> Fields:
    """The mixing rule a DecL cell's strategy entry averages with (``dssl.topology.mixing``)."""
    from dssl.topology.mixing import DEFAULT_RULE

    return {"mixing": study.strategies[entry].round_options.get("mixing", DEFAULT_RULE)}


def _trained(study: Study, cell: GridCell) -> Fields:
    """The fields every pretraining cell has after its key: the dataset, its model's backbone family (which
    ``pretrain.optimizers`` entry its training reads), its seeds' key, and its model's registry names (its
    method and backbone: the code components its stages run)."""
    model = study.models[cell.model]
    return {"dataset": study.dataset, "family": model.family, "seeds_key": cell.seeds_key, "method": model.method,
            "backbone": model.backbone}


def _fl_cells(params: dict) -> list[Fields]:
    study = _study(params)
    return [{"model": c.model, "partition": c.place, "strategy": c.strategy, **_trained(study, c),
             **_strategy_code(study, c.strategy)} for c in study.cells("fl")]


def _decl_cells(params: dict) -> list[Fields]:
    from dssl.config.lookups import graph_partition

    study = _study(params)
    return [{"model": c.model, "graph": c.place, "strategy": c.strategy, "dataset": study.dataset,   # before partition
             "partition": graph_partition(params, c.place), **_trained(study, c),
             **_strategy_code(study, c.strategy), **_mixing_rule(study, c.strategy)} for c in study.cells("decl")]


def _weight_distance_cells(params: dict) -> list[Fields]:
    cells = weight_distance_cells(params)
    dataset = _study(params).dataset if cells else None
    return [{"model": m, "partition": p, "strategy": s, "dataset": dataset, "seeds_key": key}
            for (m, p, s), key in zip(cells, seeds_keys(params, "fl", cells))]


def _feature_cells(params: dict) -> list[Fields]:
    cells = feature_cells(params)
    models = _study(params).models if cells else {}
    return [{"model": m, "partition": p, "strategy": s, "dataset": params["features"]["dataset"],
             "backbone": models[m].backbone} for m, p, s in cells]


def _local_cells(params: dict) -> list[Fields]:
    study = _study(params)
    return [{"model": c.model, "partition": c.place, **_trained(study, c)} for c in study.cells("local")]


def _local_params(params: dict) -> list[str]:
    """``pretrain.local.clients`` is optional (without it every client of the partition trains)."""
    local = params["pretrain"].get("local") or {}
    return _pretrain_params("local")(params) + (["pretrain.local.clients"] if "clients" in local else [])


def _central_cells(params: dict) -> list[Fields]:
    study = _study(params)
    return [{"model": c.model, **_trained(study, c)} for c in study.cells("central")]


def _pretrain_params(framework: str, extra: tuple[str, ...] = ()) -> Templates:
    return _const("models.{model}", "pretrain.dataset", "pretrain.image_size", "pretrain.optimizers.{family}",
                  f"pretrain.{framework}.train", *extra, "{seeds_key}")


def _evaluation_inputs(framework: str, *cell_inputs: str) -> Templates:
    """A cell's inputs and the prepared datasets its kind's stages read (``evaluation_plan.framework_pairs``:
    one template list serves every instance of a kind, so each depends on the datasets any of them reads)."""
    def inputs(params: dict) -> list[str]:
        from dssl.config.evaluation_plan import framework_pairs

        datasets = dict.fromkeys(dataset for dataset, _ in framework_pairs(params, framework))
        return [*cell_inputs, *(f"data/prepared/{d}" for d in datasets)]
    return inputs


def _feature_params(params: dict) -> list[str]:
    """Fig. 3's features read the model and the ViT features the evaluations use (``evaluate.vit_pool``)."""
    pool = ["evaluate.vit_pool"] if "vit_pool" in params["evaluate"] else []
    return ["features", "pretrain.image_size", "models.{model}", *pool]


def _evaluation_params(framework: str, extra: tuple[str, ...] = (),
                       seeds: Templates = _const("{seeds_key}")) -> Templates:
    """``seeds``: the keys of the seed lists an instance evaluates (default its cell's, ``{seeds_key}``)."""
    def keys(params: dict) -> list[str]:
        from dssl.config.evaluation_plan import framework_pairs

        evaluate = params["evaluate"]
        protocols = dict.fromkeys(protocol for _, protocol in framework_pairs(params, framework))
        pool = [f"evaluate.{key}" for key in ("vit_pool", "reestimate_batchnorm") if key in evaluate]
        grids = ["evaluate.grids"] if evaluate.get("grids") and framework in ("fl", "decl", "local", "random") else []
        listed = [f"evaluate.protocols.{framework}"] if framework in (evaluate.get("protocols") or {}) else []
        return ["pretrain.image_size", "evaluate.datasets", *listed, *grids, *pool,
                *(f"evaluate.{p}" for p in protocols), *extra, *seeds(params)]
    return keys


def _random_cells(params: dict) -> list[Fields]:
    return [{"backbone": b} for b in params["evaluate"].get("random_backbones", [])]


def _random_seed_keys(params: dict) -> list[str]:
    """Every seed list a random-init stage runs: the union over the backbones' cells, so that each cell pairs
    with its reference seed by seed (one template list serves all of the kind's instances)."""
    return reference_seed_keys(params, params["evaluate"].get("random_backbones", []))


def _results(framework: str, cell: str) -> Templates:
    """An evaluation stage's result folder: one JSON per seed x dataset x protocol, DVC metrics."""
    return _const(f"reports/metrics/{framework}/{cell}/")


def _evaluated(framework: str, cells: Callable[[dict], list[Fields]],
               args: tuple[str, ...]) -> Callable[[dict], list[Fields]]:
    """Cells (``args``: their key's fields) that some table reads on at least one dataset and protocol
    (``evaluation_plan.stage_pairs``), each with the protocols it runs: ``protocols``, their names sorted and
    joined by '+' (the ``protocol/{protocols}`` component)."""
    def evaluated(params: dict) -> list[Fields]:
        from dssl.config.evaluation_plan import stage_pairs

        found = []
        for fields in cells(params):
            pairs = stage_pairs(params, framework, tuple(fields[a] for a in args))
            if pairs:
                found.append({**fields, "protocols": "+".join(sorted({protocol for _, protocol in pairs}))})
        return found
    return evaluated


def _named(section: str, *lookups: str) -> Callable[[dict], list[Fields]]:
    """One instance per entry of a params section; ``lookups`` copy fields of the entry."""
    return lambda params: [{"name": name, **{k: str(spec[k]) for k in lookups}}
                           for name, spec in (params.get(section) or {}).items()]


def _single(section: str) -> Callable[[dict], list[Fields]]:
    return lambda params: [{}] if params.get(section) else []


CODE_MANIFESTS = "reports/lineage/code"


def manifest_path(name: str) -> str:
    """The code manifest a stage depends on under DVC (see ``pipeline/code.py``): a stage kind's shared
    machinery (``pretrain_fl``) or a component's modules (``method/simsiam``, ``strategy/fedmar+alignment/cosine``,
    ``protocol/knn+linear_probe_10pct``)."""
    return f"{CODE_MANIFESTS}/{name}.json"


def component_terms(component: str) -> list[tuple[str, str]]:
    """``(registry, name)`` of every registry entry a component runs. A component is ``<registry>/<name>``
    terms joined by '+', a term without a registry being of the one before: a DVC stage's dependency list
    is one template for all of a kind's cells, so what varies in number from cell to cell (the protocols an
    evaluation runs, the alignment a strategy option names) shares one manifest, ``manifest_path``."""
    terms, registry = [], ""
    for term in component.split("+"):
        registry, name = term.split("/", 1) if "/" in term else (registry, term)
        if registry not in SPEC_PACKAGES or not name:
            raise ValueError(f"code component {component!r}: {term!r} is not <registry>/<name> with a registry "
                             f"of {', '.join(sorted(SPEC_PACKAGES))}")
        terms.append((registry, name))
    return terms


def component_modules(component: str) -> list[str]:
    """The modules of a component's entries: each entry's spec module and the module implementing it
    (``SpecRegistry.modules_of``; nothing torch is imported), each once."""
    modules = [module for registry, name in component_terms(component)
               for module in SpecRegistry.of(registry).modules_of(name)]
    return list(dict.fromkeys(modules))


def _code_outputs(params: dict) -> list[str]:
    kinds = [manifest_path(kind.name) for kind in KINDS if kind.name != "code" and kind.grid(params)]
    return kinds + [manifest_path(c) for c in used_components(params)]


def used_components(params: dict) -> list[str]:
    """Every ``<registry>/<name>`` code component some stage of ``params`` runs, sorted."""
    return sorted({template.format(**fields) for kind in KINDS if kind.name != "code"
                   for fields in kind.grid(params) for template in kind.components(params)})


# What an instance of a kind runs besides its kind's machinery (``_const`` over the cell's fields).
_TRAINED = _const("method/{method}", "backbone/{backbone}", "strategy/{strategy_code}")
_MIXED = _const("method/{method}", "backbone/{backbone}", "strategy/{strategy_code}", "mixing/{mixing}")
_TRAINED_ALONE = _const("method/{method}", "backbone/{backbone}", f"strategy/{SINGLE_CLIENT_STRATEGY}")
_ENCODED = _const("backbone/{backbone}")
_EVALUATED = _const("backbone/{backbone}", "protocol/{protocols}")


def _every_mixing_rule(params: dict) -> list[str]:
    """A graph is saved with the matrix of every rule (``pipeline.graph.write_graph``)."""
    return [f"mixing/{rule}" for rule in SpecRegistry.of("mixing").names()]


REPORT_READS = ("evaluate_", "weight_distance", "features")   # kinds whose outputs the report's sections read


def _outputs_of(params: dict, kinds: tuple[str, ...]) -> list[str]:
    """Every output folder or file of the stages of ``params`` whose kind starts with one of ``kinds``."""
    return [out.rstrip("/").format(**fields) for kind in KINDS if kind.name.startswith(kinds)
            for fields in kind.grid(params) for out in kind.outputs(params)]


def result_folders(params: dict) -> list[str]:
    """The result folders of every evaluation stage of ``params`` (``reports/metrics/<framework>/<cell>``):
    what the report reads, and nothing a cell the params no longer hold left behind."""
    return _outputs_of(params, ("evaluate_",))


def _report_inputs(params: dict) -> list[str]:
    """Every evaluation result folder, every weight-distance (Table 5) and features (Fig. 3) folder, every
    graph's statistics (Table 6 states its mixing rules' distances), the partition heatmaps and graph
    drawings the report shows, the theory summary when the theory stage runs, and the verdict records of
    other runs it compares (``report.verdicts_elsewhere``)."""
    results = _outputs_of(params, REPORT_READS)
    graphs = [f"data/graphs/{name}/graph.json" for name in [*(params.get("graphs") or {}),
                                                             *(params.get("improved_graphs") or {})]]
    drawings = [plot.format(**fields) for kind in KINDS if kind.name in ("partitions", "graphs", "graph_improve")
                for fields in kind.grid(params) for plot in kind.plots(params)]
    elsewhere = list(((params.get("report") or {}).get("verdicts_elsewhere") or {}).values())
    return results + graphs + drawings + (["reports/theory"] if params.get("theory") else []) + elsewhere


def _report_params(params: dict) -> list[str]:
    """What the report prints of params.yaml: its sections' options and the settings list."""
    listed = ("partitions", "graphs", "improved_graphs", "weight_distance", "features")
    printed = [f"evaluate.{key}" for key in ("grids", "reestimate_batchnorm") if key in params["evaluate"]]
    return ["profile", "report", "pretrain", "strategies", "evaluate.datasets", "evaluate.protocols", *printed,
            "models", "seeds", *(key for key in listed if params.get(key))]


def _report_outputs(params: dict) -> list[str]:
    return ["reports/README.md", "reports/README.html", f"{REPORT_SECTIONS}/", f"{REPORT_FIGURES}/"]


# The report's section folder (reporting.sections.FOLDER); a table's CSV is <folder>/<section>.csv.
REPORT_SECTIONS = "reports/sections"
# The report's figures (reporting.sections.FIGURES): one folder, declared as DVC plots.
REPORT_FIGURES = "reports/figures/report"
TABLE1_CSV = f"{REPORT_SECTIONS}/table1.csv"
# A DVC plot template kept in the repository (.dvc/plots/<name>.json): Table 1 as grouped bars.
TABLE1_TEMPLATE = "table1"


def plot_definitions(params: dict) -> list[dict]:
    """dvc.yaml's top-level ``plots``: data plots over the report's tables (``dvc plots show``)."""
    sections = (params.get("report") or {}).get("sections") or {}
    plots = []
    if "table1" in sections:
        plots.append({"table1": {"template": TABLE1_TEMPLATE, "x": "mean", "y": {TABLE1_CSV: "row"},
                                 "title": "Table 1: accuracy (%) per row and setting", "x_label": "accuracy (%)",
                                 "y_label": "model"}})
    if "fig2a" in sections:
        plots.append({"fig2a": {"x": "connectivity", "y": {f"{REPORT_SECTIONS}/fig2a.csv": "mean"},
                                "title": "Fig. 2a: DecL accuracy (%) against |A|", "x_label": "|A|",
                                "y_label": "accuracy (%)"}})
    return plots



KINDS: tuple[StageKind, ...] = (
    StageKind("code", "code:run", (), "Code manifests: the md5 of each stage kind's import closure.",
              grid=lambda params: [{}], params=_const(), outputs=_code_outputs),
    StageKind("prepare", "prepare:run", ("name",), "Prepare a dataset (params section 'datasets').",
              grid=_named("datasets"), params=_const("datasets.{name}"),
              outputs=_const("data/prepared/{name}/"), whole_dataset=True),
    StageKind("partitions", "partition:run", (), "Split prepared datasets among clients (every 'partitions' entry).",
              grid=_single("partitions"), params=_const("partitions"),
              inputs=lambda params: sorted({f"data/prepared/{spec['dataset']}"
                                            for spec in params["partitions"].values()}),
              outputs=lambda params: [out for name in params["partitions"] for out in (
                  f"data/partitions/{name}/", f"reports/figures/partitions/{name}.png")],
              plots=lambda params: [f"reports/figures/partitions/{name}.png" for name in params["partitions"]]),
    StageKind("graphs", "graph:run", (), "Communication graphs and their mixing matrices (every 'graphs' entry).",
              grid=_single("graphs"), params=_const("graphs"),
              inputs=lambda params: sorted({f"data/partitions/{spec['partition']}"
                                            for spec in params["graphs"].values()}),
              outputs=lambda params: [out for name in params["graphs"] for out in (
                  f"data/graphs/{name}/graph.json", f"reports/figures/graphs/{name}.png")],
              plots=lambda params: [f"reports/figures/graphs/{name}.png" for name in params["graphs"]],
              components=_every_mixing_rule),
    StageKind("graph_improve", "graph_improve:run", ("name",),
              "Add edges to a graph greedily (params 'improved_graphs').",
              grid=_named("improved_graphs", "base"), params=_const("improved_graphs.{name}", "theory"),
              inputs=_const("data/graphs/{base}/graph.json"),
              outputs=_const("data/graphs/{name}/graph.json", "reports/figures/graphs/{name}.png"),
              plots=_const("reports/figures/graphs/{name}.png"), components=_every_mixing_rule),
    StageKind("theory", "theory:run", (), "Paper A's linear-model theory checked numerically (params 'theory').",
              grid=_single("theory"), params=_const("theory"),
              inputs=lambda params: [f"data/graphs/{g}/graph.json" for g in params["theory"]["graphs"]],
              outputs=_const("reports/theory/")),
    StageKind("pretrain_fl", "pretrain:run_fl", ("model", "partition", "strategy"),
              "Federated SSL pretraining with a strategy (params 'strategies'), every seed.",
              grid=_fl_cells, params=_pretrain_params("fl", ("strategies.{strategy}",)),
              inputs=_const("data/prepared/{dataset}", "data/partitions/{partition}"),
              outputs=_const("models/fl/{model}/{partition}/{strategy}/"), training=True, components=_TRAINED),
    StageKind("pretrain_decl", "pretrain:run_decl", ("model", "graph", "strategy"),
              "Decentralized SSL pretraining on a graph with a strategy, every seed.",
              grid=_decl_cells, params=_pretrain_params("decl", ("strategies.{strategy}",)),
              inputs=_const("data/prepared/{dataset}", "data/partitions/{partition}", "data/graphs/{graph}/graph.json"),
              outputs=_const("models/decl/{model}/{graph}/{strategy}/"), training=True, components=_MIXED),
    StageKind("pretrain_central", "pretrain:run_central", ("model",),
              "Centralised SSL pretraining (reference), every seed.",
              grid=_central_cells, params=_pretrain_params("central"),
              inputs=_const("data/prepared/{dataset}"),
              outputs=_const("models/central/{model}/"), training=True, components=_TRAINED_ALONE),
    StageKind("pretrain_local", "pretrain:run_local", ("model", "partition"),
              "Stand-alone SSL pretraining: clients of a partition, each trained alone on its data, every seed.",
              grid=_local_cells, params=_local_params,
              inputs=_const("data/prepared/{dataset}", "data/partitions/{partition}"),
              outputs=_const("models/local/{model}/{partition}/"), training=True, components=_TRAINED_ALONE),
    StageKind("weight_distance", "weight_distance:run", ("model", "partition", "strategy"),
              "Paper A's Table 5: stand-alone clients' encoders against an FL cell's global encoder, every seed.",
              grid=_weight_distance_cells, params=_const("weight_distance.clients", "{seeds_key}"),
              inputs=_const("models/local/{model}/{partition}", "models/fl/{model}/{partition}/{strategy}"),
              outputs=_const("reports/distances/{model}/{partition}/{strategy}/")),
    StageKind("features", "features:run", ("model", "partition", "strategy"),
              "Paper A's Fig. 3: test features of stand-alone clients and an FL cell's global model, one seed.",
              grid=_feature_cells, params=_feature_params,
              inputs=_const("data/prepared/{dataset}", "models/local/{model}/{partition}",
                            "models/fl/{model}/{partition}/{strategy}"),
              outputs=_const("reports/features/{model}/{partition}/{strategy}/"), components=_ENCODED),
    StageKind("evaluate_fl", "evaluate:run_fl", ("model", "partition", "strategy"),
              "Evaluate an FL cell: every downstream dataset, protocol and seed.",
              grid=_evaluated("fl", _fl_cells, ("model", "partition", "strategy")),
              params=_evaluation_params("fl", ("strategies.{strategy}",)),
              inputs=_evaluation_inputs("fl", "models/fl/{model}/{partition}/{strategy}"),
              outputs=_results("fl", "{model}/{partition}/{strategy}"),
              metrics=_results("fl", "{model}/{partition}/{strategy}"), training=True, components=_EVALUATED),
    StageKind("evaluate_decl", "evaluate:run_decl", ("model", "graph", "strategy"),
              "Evaluate a DecL cell: every downstream dataset, protocol and seed.",
              grid=_evaluated("decl", _decl_cells, ("model", "graph", "strategy")),
              params=_evaluation_params("decl", ("strategies.{strategy}",)),
              inputs=_evaluation_inputs("decl", "models/decl/{model}/{graph}/{strategy}",
                                        "data/graphs/{graph}/graph.json"),
              outputs=_results("decl", "{model}/{graph}/{strategy}"),
              metrics=_results("decl", "{model}/{graph}/{strategy}"), training=True, components=_EVALUATED),
    StageKind("evaluate_central", "evaluate:run_central", ("model",),
              "Evaluate a central model: every downstream dataset, protocol and seed.",
              grid=_evaluated("central", _central_cells, ("model",)), params=_evaluation_params("central"),
              inputs=_evaluation_inputs("central", "models/central/{model}"),
              outputs=_results("central", "{model}"), metrics=_results("central", "{model}"), training=True,
              components=_EVALUATED),
    StageKind("evaluate_local", "evaluate:run_local", ("model", "partition"),
              "Evaluate the stand-alone clients of a partition: every downstream dataset, protocol and seed.",
              grid=_evaluated("local", _local_cells, ("model", "partition")), params=_evaluation_params("local"),
              inputs=_evaluation_inputs("local", "models/local/{model}/{partition}"),
              outputs=_results("local", "{model}/{partition}"),
              metrics=_results("local", "{model}/{partition}"), training=True, components=_EVALUATED),
    StageKind("evaluate_random", "evaluate:run_random", ("backbone",),
              "Evaluate a randomly initialised backbone (reference), every seed.",
              grid=_evaluated("random", _random_cells, ("backbone",)),
              params=_evaluation_params("random", seeds=_random_seed_keys), inputs=_evaluation_inputs("random"),
              outputs=_results("random", "{backbone}"), metrics=_results("random", "{backbone}"), training=True,
              components=_EVALUATED),
    StageKind("report", "report:run", (),
              "Tables, figures, reports/README.md and README.html from the evaluation results.",
              grid=_single("report"),
              params=_report_params,
              inputs=_report_inputs, outputs=_report_outputs, plots=_const(f"{REPORT_FIGURES}/")),
)
KINDS_BY_NAME = {kind.name: kind for kind in KINDS}


def instances(params: dict) -> list[StageInstance]:
    """Every stage of the DAG for ``params`` (a validated params dict), in catalogue order; its grids read
    the ``Study`` of ``params``."""
    return [stage for kind in KINDS for stage in _kind_instances(kind, params)]


def _kind_instances(kind: StageKind, params: dict) -> list[StageInstance]:
    outputs = kind.outputs(params)
    declared = declared_outputs(kind, params)
    return [StageInstance(kind, fields, _fmt(kind.params(params), fields), _fmt(kind.inputs(params), fields),
                          _fmt((o.rstrip("/") for o in outputs), fields),
                          _fmt((o.rstrip("/") for o in outputs if o.endswith("/")), fields),
                          _fmt((o.rstrip("/") for o in declared["metrics"]), fields),
                          _fmt((o.rstrip("/") for o in declared["plots"]), fields),
                          _fmt(kind.components(params), fields))
            for fields in kind.grid(params)]


def declared_outputs(kind: StageKind, params: dict) -> dict[str, list[str]]:
    """A kind's output templates as dvc.yaml groups them: ``outs``, ``metrics`` and ``plots``.

    Raises ValueError when a metrics or plots template is not one of the kind's outputs (the
    Snakefile knows outputs only, so the two engines would disagree)."""
    outputs = kind.outputs(params)
    metrics, plots = kind.metrics(params), kind.plots(params)
    stray = [t for t in (*metrics, *plots) if t not in outputs]
    if stray:
        raise ValueError(f"stage kind {kind.name!r}: metrics/plots {stray} are not among its outputs {outputs}")
    return {"outs": [o for o in outputs if o not in metrics and o not in plots], "metrics": metrics, "plots": plots}


def producer(params: dict, path: str | Path) -> StageInstance | None:
    """The stage whose output is ``path`` or a folder holding it."""
    target = Path(path).as_posix()
    return next((instance for instance in instances(params) if instance.writes(target)), None)


def wildcard_pattern(values: Iterable[str]) -> str:
    """A Snakemake wildcard constraint admitting exactly ``values``."""
    values = sorted(set(values))
    return "|".join(re.escape(v) for v in values) if values else "^$"


class Catalogue:
    """The catalogue applied to one project and params file (what both engines render)."""

    def __init__(self, params: dict, project: Path):
        self.params = params
        self.project = Path(project)

    @cached_property
    def stages(self) -> list[StageInstance]:
        return instances(self.params)

    def code(self, kind: StageKind) -> list[str]:
        """The kind's shared code: its import closure (the whole package for the ``code`` stage itself)."""
        if kind.name == "code":
            return [self.package_folder]
        return code_dependencies(kind.module, self.project)

    def component_code(self, component: str) -> list[str]:
        """A component's code: the import closure of the modules implementing its entries."""
        return code_dependencies(component_modules(component), self.project)

    def dvc_code(self, kind: StageKind) -> list[str]:
        """What a DVC stage of the kind depends on for its code: its kind's manifest and the manifests of the
        components its instance runs (templates over the instance's fields), one lock entry each."""
        if kind.name == "code":
            return [self.package_folder]
        return [manifest_path(kind.name), *(manifest_path(c) for c in kind.components(self.params))]

    @property
    def package_folder(self) -> str:
        return (source_root(self.project.resolve()) / PACKAGE).relative_to(self.project.resolve()).as_posix()

    def kinds_with_stages(self) -> list[StageKind]:
        return list(dict.fromkeys(s.kind for s in self.stages))

    def of_kind(self, kind: StageKind) -> list[StageInstance]:
        return [s for s in self.stages if s.kind is kind]

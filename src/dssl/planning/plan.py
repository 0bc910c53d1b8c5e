"""``dssl plan <params>``: what a params file costs before it runs, per stage and per table.

Per stage (``workload``): images trained, FLOPs, GPU-hours, checkpoint bytes (one round, written over the
run, left on disk) and saved weights; per table: the stages of its grids with their evaluation; per
dataset: the disk its prepared arrays take; per SLURM job (every training stage): its estimated hours
against the runtime the Snakemake profile requests for its rule, with a warning for each job that would
run past it and the runtime that covers the rule's longest job.

GPU-hours are FLOPs over a throughput (``throughput``): for training stages measured by
``benchmarks/gpu_round.py``, for evaluation stages by ``benchmarks/finetune_rate.py``, where its results
file has the backbone, image size and step option, else an assumed share of a GPU's peak; every stage is
printed with the rate behind it (``measured: <row>`` or ``assumed: <share> x <peak>``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dssl.planning.costs import CostCache, model_costs
from dssl.planning.throughput import DEFAULT_GPU, DEFAULT_SHARE, EVALUATION, RESULTS, TRAINING, Rate, Throughput
from dssl.planning.workload import StageCost, Workload
from dssl.yamlio import load_yaml

PROFILE = Path("profiles/slurm")
SAFETY = 1.5   # the runtime a rule should request: its longest job's estimate times this
DATA_TABLE = "data"
REFERENCES = {"central": "central", "random": "random"}   # tables of the reference stages


@dataclass
class Job:
    stage: str
    rule: str
    hours: float
    limit_minutes: float | None


@dataclass
class Plan:
    params_path: str
    profile_name: str
    stages: list[StageCost]
    hours: dict[str, float]                 # GPU-hours by stage (GPU stages only)
    tables: dict[str, list[str]]            # table -> its stages
    rates: dict[tuple[str, str], Rate]      # (backbone, step option) -> throughput used
    datasets: dict[str, dict[str, Any]]     # prepared disk per dataset
    jobs: list[Job]
    profile: str | None
    image_size: int
    flops_per_image: dict[str, float]       # training step FLOPs per model
    notes: list[str] = field(default_factory=list)
    eval_rates: dict[tuple[str, str], Rate] = field(default_factory=dict)   # the evaluation stages' rates

    def stage(self, name: str) -> StageCost:
        return next(s for s in self.stages if s.stage == name)

    def stage_rates(self, cost: StageCost) -> list[Rate]:
        """The rates a stage's FLOPs were converted with (one per step option it runs)."""
        rates = self.eval_rates if cost.kind.startswith("evaluate_") else self.rates
        return [rates[cost.backbone, option] for option in cost.flops if (cost.backbone, option) in rates]

    def table_totals(self) -> dict[str, dict[str, float]]:
        """Per table: stages, images, FLOPs, GPU-hours (all its stages), own GPU-hours (stages no earlier
        table has) and checkpoint bytes written; plus ``all stages``, each stage once."""
        totals, seen = {}, set()
        for table, names in self.tables.items():
            costs = [self.stage(n) for n in names]
            totals[table] = {
                "stages": len(names),
                "images_trained": sum(c.images_trained for c in costs),
                "flops": sum(c.total_flops for c in costs),
                "gpu_hours": sum(self.hours.get(n, 0.0) for n in names),
                "own_gpu_hours": sum(self.hours.get(n, 0.0) for n in names if n not in seen),
                "checkpoint_written": sum(c.checkpoint_written for c in costs),
            }
            seen |= set(names)
        totals["all stages"] = {
            "stages": len(self.stages), "images_trained": sum(c.images_trained for c in self.stages),
            "flops": sum(c.total_flops for c in self.stages), "gpu_hours": sum(self.hours.values()),
            "own_gpu_hours": sum(self.hours.values()),
            "checkpoint_written": sum(c.checkpoint_written for c in self.stages)}
        return totals

    def over_limit(self) -> list[Job]:
        return [j for j in self.jobs if j.limit_minutes is not None and j.hours * 60 > j.limit_minutes]

    def suggested_runtimes(self) -> dict[str, int]:
        """Per training rule: minutes covering its longest job times ``SAFETY``, rounded up to an hour."""
        longest: dict[str, float] = {}
        for job in self.jobs:
            longest[job.rule] = max(longest.get(job.rule, 0.0), job.hours)
        return {rule: 60 * max(1, math.ceil(hours * SAFETY)) for rule, hours in longest.items()}


def table_stages(params: dict, names: set[str]) -> dict[str, list[str]]:
    """Each table's stages: for every grid named after it (``pretrain.<framework>.grids``,
    ``pretrain.local.grids``, ``weight_distance.grids``) its cells' training and evaluation stages (a
    weight-distance grid also needs the FL and stand-alone cells it compares); ``central`` and ``random``
    for the reference stages; ``data`` for the rest. Stages outside ``names`` (not in the DAG) are left out."""
    from dssl.config.grids import named_grids

    tables: dict[str, list[str]] = {}

    def add(table: str, *stages: str) -> None:
        members = tables.setdefault(table, [])
        members += [s for s in stages if s in names and s not in members]

    for framework in ("fl", "decl"):
        for table, cells in named_grids(params, framework).items():
            for cell in cells:
                key = "-".join(cell)
                add(table, f"pretrain_{framework}@{key}", f"evaluate_{framework}@{key}")
    for table, cells in named_grids(params, "local").items():
        for cell in cells:
            add(table, f"pretrain_local@{'-'.join(cell)}", f"evaluate_local@{'-'.join(cell)}")
    for table, cells in named_grids(params, "weight_distance").items():
        for model, partition, strategy in cells:
            fl, local = f"{model}-{partition}-{strategy}", f"{model}-{partition}"
            add(table, f"weight_distance@{fl}", f"pretrain_fl@{fl}", f"evaluate_fl@{fl}",
                f"pretrain_local@{local}", f"evaluate_local@{local}")
    for kind, table in REFERENCES.items():
        add(table, *(n for n in sorted(names) if n.startswith((f"pretrain_{kind}@", f"evaluate_{kind}@"))))
    grouped = {s for members in tables.values() for s in members}
    add(DATA_TABLE, *(n for n in sorted(names) if n not in grouped))
    return {table: members for table, members in tables.items() if members}


def runtime_limits(profile: Path) -> tuple[dict[str, float], float | None] | None:
    """Minutes per rule (``set-resources``) and the default (``default-resources``) of a Snakemake
    profile's config.yaml; None when there is none."""
    config_file = profile / "config.yaml"
    if not config_file.is_file():
        return None
    config = load_yaml(config_file.read_text()) or {}
    per_rule = {rule: parse_runtime(values["runtime"]) for rule, values in (config.get("set-resources") or {}).items()
                if isinstance(values, dict) and "runtime" in values}
    default = (config.get("default-resources") or {}).get("runtime")
    return per_rule, parse_runtime(default) if default is not None else None


def parse_runtime(value: Any) -> float:
    """Snakemake's ``runtime`` in minutes: a number (minutes) or a string with a unit (s, m, h, d)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip().lower()
    units = {"s": 1 / 60, "m": 1, "min": 1, "h": 60, "d": 1440}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit) and text[:-len(unit)].strip().replace(".", "", 1).isdigit():
            return float(text[:-len(unit)]) * units[unit]
    if text.replace(".", "", 1).isdigit():
        return float(text)
    raise ValueError(f"cannot read the runtime {value!r} (minutes, or a number with s, m, h or d)")


def load_plan_params(params_path: Path, root: Path) -> tuple[dict, dict[str, str]]:
    """The params, validated as the stages validate them, except that a dataset folder that is not
    there yet (or not in a known layout) is a note, by dataset, not an error: a plan is made before the
    data is in place."""
    from dssl.config.checker import Checker, ParamsError
    from dssl.config.params import read_params, validate
    from dssl.pipeline.validate import REGISTRY_CHECKS

    params = read_params(params_path)
    checker = Checker(params, root)
    for check in REGISTRY_CHECKS:
        check(checker)
    problems = validate(params, root) + checker.problems
    missing = [p for p in problems if p.path.startswith("datasets.") and p.path.endswith(".root")]
    blocking = [p for p in problems if p not in missing]
    if blocking:
        raise ParamsError(str(params_path), blocking)
    return params, {p.path.split(".")[1]: f"{p.path}: {p.message}" for p in missing}


def make_plan(params_path: Path | str, root: Path, *, gpu: str = DEFAULT_GPU, share: float = DEFAULT_SHARE,
              gpu_name: str | None = None, results: Path | None = None, profile: Path | None = None,
              cache: CostCache | None = None) -> Plan:
    """The plan of ``params_path`` in the project at ``root`` (relative paths resolve against it)."""
    from dssl.data.datasets import DATASETS
    from dssl.pipeline.catalogue import KINDS_BY_NAME

    root = Path(root)
    params, folder_notes = load_plan_params(Path(params_path), root)
    cache = cache if cache is not None else CostCache()
    from dssl.pipeline.layout import pipeline_folder

    # a profile's written partitions are in its own pipeline folder (runs/<profile>/), not the embedded one's
    outputs = root / pipeline_folder(params_path, params, root)
    workload = Workload(params, root, cache, folder_notes, outputs)
    notes: list[str] = []
    stages = workload.stages()
    throughput = Throughput.from_file(_under(root, results or RESULTS), gpu=gpu, share=share, gpu_name=gpu_name)
    rates: dict[tuple[str, str], Rate] = {}
    eval_rates: dict[tuple[str, str], Rate] = {}   # evaluation stages: fine-tuning rows, never pretraining's
    hours: dict[str, float] = {}
    for cost in stages:
        if not KINDS_BY_NAME[cost.kind].training or cost.backbone is None:
            continue
        hours[cost.stage] = 0.0
        for option, flops in cost.flops.items():
            evaluation = cost.kind.startswith("evaluate_")
            rate = (eval_rates if evaluation else rates).setdefault(
                (cost.backbone, option),
                throughput.rate(cost.backbone, workload.size, option, EVALUATION if evaluation else TRAINING))
            hours[cost.stage] += flops / rate.flops_per_s / 3600
    profile_dir = _under(root, profile or PROFILE)
    limits = runtime_limits(profile_dir)
    jobs = [Job(c.stage, c.kind, hours[c.stage], _limit(limits, c.kind)) for c in stages if c.stage in hours]
    trained = dict.fromkeys(c.model for c in stages if c.kind.startswith("pretrain_") and c.model)
    flops_per_image = {model: model_costs(params["models"][model], workload.size, workload.in_chans, cache).train
                       for model in trained}
    datasets = {}
    for name in params.get("datasets") or {}:
        sizes = workload.sizes(name)
        shape = DATASETS[name].image_shape(workload.dataset_spec(name))
        datasets[name] = {"sizes": sizes, "shape": list(shape), "bytes": sum(sizes.values()) * math.prod(shape)}
    cache.save()
    if limits is None:
        notes.append(f"no Snakemake profile at {profile or PROFILE}: job runtimes not checked")
    if eval_rates and not any(rate.measured for rate in eval_rates.values()):
        notes.append("the evaluation rate is assumed (a share of the GPU's peak): no benchmarks/finetune_rate.py "
                     "row for these backbones on a GPU; evaluation is not converted at the pretraining rate")
    return Plan(str(params_path), str(params.get("profile", "default")), stages, hours,
                table_stages(params, {s.stage for s in stages}), rates, datasets, jobs,
                str(profile or PROFILE) if limits is not None else None, workload.size, flops_per_image,
                notes + list(workload.notes.values()), eval_rates=eval_rates)


def _under(root: Path, path: Path) -> Path:
    return path if path.is_absolute() else root / path


def _limit(limits: tuple[dict[str, float], float | None] | None, rule: str) -> float | None:
    if limits is None:
        return None
    per_rule, default = limits
    return per_rule.get(rule, default)


# -- output ------------------------------------------------------------------------------------------


def render(plan: Plan, stages: bool = False) -> str:
    """The plan as text: throughput, FLOPs per image, GPU-hours per table, jobs, data disk, notes."""
    lines = [f"plan of {plan.params_path} (profile {plan.profile_name}), {plan.image_size} px"]
    lines += ["", "throughput (FLOPs -> hours):"]
    lines += [f"  {backbone} {option}, training: {rate.source}"
              for (backbone, option), rate in sorted(plan.rates.items())]
    lines += [f"  {backbone} {option}, evaluation: {rate.source}"
              for (backbone, option), rate in sorted(plan.eval_rates.items())]
    lines += ["", "training FLOPs per image (one step: views, forward and backward; torch.utils.flop_counter):"]
    lines += [f"  {model:<16} {_flops(f)}" for model, f in plan.flops_per_image.items()]
    lines += ["", "GPU-hours per table (a table's stages: its grids' training and evaluation; 'own': without "
                  "stages an earlier table has):",
              f"  {'table':<20} {'stages':>6} {'images trained':>15} {'FLOPs':>10} {'GPU-h':>10} {'own GPU-h':>10} "
              f"{'checkpoints written':>20}"]
    for table, t in plan.table_totals().items():
        lines.append(f"  {table:<20} {t['stages']:>6} {_count(t['images_trained']):>15} {_flops(t['flops']):>10} "
                     f"{t['gpu_hours']:>10,.1f} {t['own_gpu_hours']:>10,.1f} {_bytes(t['checkpoint_written']):>20}")
    lines += evaluation_share_text(plan)
    if stages:
        lines += ["", "per stage (checkpoint per round: one seed; written and on disk: every seed):",
                  f"  {'stage':<56} {'images':>10} {'FLOPs':>10} {'GPU-h':>9} {'ckpt/round':>10} {'written':>10} "
                  f"{'on disk':>10} {'weights':>10}  rate"]
        for c in plan.stages:
            if c.stage in plan.hours:
                lines.append(f"  {c.stage:<56} {_count(c.images_trained + c.images_forward):>10} "
                             f"{_flops(c.total_flops):>10} {plan.hours[c.stage]:>9,.1f} "
                             f"{_bytes(c.checkpoint_round):>10} {_bytes(c.checkpoint_written):>10} "
                             f"{_bytes(c.checkpoint_disk):>10} {_bytes(c.outputs):>10}  "
                             + "; ".join(rate.label for rate in plan.stage_rates(c)))
    lines += ["", _jobs_text(plan)]
    lines += ["", "prepared data (data/prepared/, uint8 arrays):"]
    for name, d in plan.datasets.items():
        sizes = ", ".join(f"{split} {n:,}" for split, n in d["sizes"].items())
        lines.append(f"  {name:<16} {sizes} images of {'x'.join(map(str, d['shape']))}: {_bytes(d['bytes'])}")
    lines.append(f"  {'total':<16} {_bytes(sum(d['bytes'] for d in plan.datasets.values()))}")
    if plan.notes:
        lines += ["", "notes:"] + [f"  - {note}" for note in plan.notes]
    return "\n".join(lines)


EVALUATION_RATIO = 10   # evaluation GPU-hours beyond this many times pretraining's: the plan says where they go


def evaluation_share_text(plan: Plan) -> list[str]:
    """Pretraining against evaluation GPU-hours, and evaluation's hours per downstream dataset (a stage's hours
    shared out by its datasets' FLOPs); where evaluation passes ``EVALUATION_RATIO`` x pretraining, why."""
    kinds = {c.stage: c for c in plan.stages if c.stage in plan.hours}
    evaluation = {name: h for name, h in plan.hours.items() if kinds[name].kind.startswith("evaluate_")}
    pretraining = sum(plan.hours.values()) - sum(evaluation.values())
    by_dataset: dict[str, float] = {}
    for name, hours in evaluation.items():
        total = sum(kinds[name].evaluation_flops.values())
        for (dataset, _), flops in kinds[name].evaluation_flops.items():
            by_dataset[dataset] = by_dataset.get(dataset, 0.0) + (hours * flops / total if total else 0.0)
    spent = sum(evaluation.values())
    ratio = spent / pretraining if pretraining else math.inf
    lines = [f"  pretraining {pretraining:,.1f} GPU-h, evaluation {spent:,.1f} GPU-h ({ratio:,.1f} x pretraining); "
             "evaluation by dataset: " + (", ".join(f"{d} {h:,.1f}" for d, h in by_dataset.items()) or "none")]
    if ratio > EVALUATION_RATIO:
        largest = max(by_dataset, key=by_dataset.get)
        lines.append(f"  evaluation is more than {EVALUATION_RATIO} x pretraining: full fine-tuning of every cell the "
                     f"tables read (the papers' protocol), most of it on {largest} ({by_dataset[largest]:,.1f} GPU-h: "
                     "its training split per epoch is many times a client's pretraining data)")
    return lines


def _jobs_text(plan: Plan) -> str:
    if plan.profile is None:
        return f"SLURM jobs: {len(plan.jobs)} (no profile to check them against)"
    over = plan.over_limit()
    lines = [f"SLURM jobs (one per training stage; runtime from {plan.profile}): {len(plan.jobs)}, "
             f"{len(over)} estimated past their rule's runtime"]
    for job in sorted(over, key=lambda j: -j.hours):
        lines.append(f"  WARNING {job.stage}: {job.hours:,.1f} GPU-h > {job.rule}'s runtime "
                     f"{job.limit_minutes:,.0f} min ({job.limit_minutes / 60:,.0f} h)")
    suggested = plan.suggested_runtimes()
    lines.append(f"  runtime covering each rule's longest job x {SAFETY} (minutes): "
                 + ", ".join(f"{rule}: {minutes:,}" for rule, minutes in suggested.items()))
    return "\n".join(lines)


def as_json(plan: Plan) -> dict:
    """The plan as plain data (``dssl plan --json``)."""
    return {
        "params": plan.params_path, "image_size": plan.image_size,
        "tables": plan.table_totals(), "table_stages": plan.tables,
        "stages": [{"stage": c.stage, "kind": c.kind, "backbone": c.backbone, "images_trained": c.images_trained,
                    "images_forward": c.images_forward, "flops": c.total_flops, "flops_by_option": c.flops,
                    "gpu_hours": plan.hours.get(c.stage), "rates": [r.label for r in plan.stage_rates(c)],
                    "checkpoint_round_bytes": c.checkpoint_round,
                    "checkpoint_written_bytes": c.checkpoint_written, "checkpoint_disk_bytes": c.checkpoint_disk,
                    "output_bytes": c.outputs} for c in plan.stages],
        "throughput": {f"{b} {o}": {"flops_per_s": r.flops_per_s, "measured": r.measured, "source": r.source}
                       for (b, o), r in plan.rates.items()},
        "evaluation_throughput": {f"{b} {o}": {"flops_per_s": r.flops_per_s, "measured": r.measured,
                                               "source": r.source} for (b, o), r in plan.eval_rates.items()},
        "flops_per_image": plan.flops_per_image, "datasets": plan.datasets,
        "jobs": [{"stage": j.stage, "rule": j.rule, "hours": j.hours, "limit_minutes": j.limit_minutes,
                  "over_limit": j in plan.over_limit()} for j in plan.jobs],
        "suggested_runtime_minutes": plan.suggested_runtimes(), "notes": plan.notes,
    }


def _count(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,.0f}"


def _flops(n: float) -> str:
    for unit, scale in (("EFLOP", 1e18), ("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if n >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,.0f} FLOP"


def _bytes(n: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,.0f} B"

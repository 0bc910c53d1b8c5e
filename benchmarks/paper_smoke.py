"""A few steps of every stage kind of a paper profile at paper size on a GPU: images/s, peak memory,
checkpoint bytes per round, and the GPU-hours ``dssl plan`` projects for the whole profile.

For each training and evaluation stage kind of the params file (``configs/paper.yaml`` by default) and
each backbone it uses, the first stage of that kind is run through the project's own code on synthetic
images: FL (``FLSimulator``, the cell's strategy, its clients per round), DecL (``DecLSimulator``, the
cell's strategy and consensus rule on a complete graph of 4 clients), central and stand-alone training
(one client, as ``train_alone``), and every evaluation protocol the profile lists (its ``evaluate``
on 32 px images resized on the fly, as CIFAR is; BatchNorm re-estimated first, as for a pretrained
encoder). Step options (precision, ...) are the params file's. A training run has one warm-up round
and ``--rounds`` timed rounds; checkpoints go to a temporary folder, so the bytes per round are what the
run wrote (``checkpoint_bytes``; a DecL round's grow with its clients: the plan scales them).

Printed per run: images/s (training images over the timed rounds' wall time; evaluation: images passed
through the encoder over the protocol's wall time), the FLOP rate that is (``dssl.planning.costs``), peak
memory (GPU: ``torch.cuda.max_memory_allocated`` of that run; CPU: the process's peak RSS so far), the
checkpoint bytes per round; then per stage kind the plan's GPU-hours (its stated throughput) and the
hours at this run's FLOP rate.

``--each`` runs one stage per kind, backbone, method and strategy instead (every training path the
profile has: 34 in ``configs/paper.yaml``, 12 in ``configs/paper_b.yaml``); with it the projection still
takes each kind's first stage. A run that torch stops (a ``RuntimeError``: say, an op without a
deterministic kernel) is printed as ``FAILED`` with the error's first line, the others still run, and
the script exits with status 1.

Default device: cuda when torch sees a GPU (``--size 224 --batch 128 --steps 2``), else the CPU at a
reduced size (``--size 28 --batch 4 --steps 1``: it checks that every kind runs, its speed says nothing).
``--device cuda`` on a machine without a GPU stops at once with one error.

    PYTHONPATH=src python benchmarks/paper_smoke.py [--params configs/paper.yaml] [--device cuda|cpu]
        [--size 224] [--batch 128] [--steps 2] [--rounds 1] [--each]
"""

from __future__ import annotations

import argparse
import resource
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
PAPER = {"size": 224, "batch": 128, "steps": 2}
CPU_REDUCED = {"size": 28, "batch": 4, "steps": 1}
DECL_CLIENTS = 4
PRETRAIN = ("pretrain_fl", "pretrain_decl", "pretrain_central", "pretrain_local")


def check_device(device: str) -> None:
    """Stop before any work when CUDA is asked for and torch sees no GPU."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"paper_smoke.py: --device {device} needs a GPU, but torch sees none "
                         f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}; check nvidia-smi and "
                         "CUDA_VISIBLE_DEVICES), or pass --device cpu for the reduced run")


def synthetic(count: int, size: int, channels: int, classes: int = 10, seed: int = 0):
    from dssl.data.imageset import ArrayImageSet

    rng = np.random.default_rng(seed)
    return ArrayImageSet(rng.integers(0, 256, (count, size, size, channels), dtype=np.uint8),
                         np.arange(count, dtype=np.int64) % classes, classes)


def peak_memory_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def build(params: dict, model: str, size: int, channels: int, device: torch.device):
    """The model as a stage builds it (its method hyper-parameters: ``method_hparams``), at the smoke's size."""
    from dssl.methods import create_method
    from dssl.pipeline.pretrain import method_hparams

    spec = params["models"][model]
    torch.manual_seed(0)
    return create_method(spec["method"], spec["backbone"], size, channels, **method_hparams(params, model)).to(device)


def train_run(args, params: dict, kind: str, fields: dict, channels: int, device: torch.device) -> dict:
    """One pretraining kind: warm-up + timed rounds in the simulator; images/s and checkpoint bytes."""
    from dssl.federation import ClientData, DecLConfig, DecLSimulator, FLConfig, FLSimulator, create_strategy
    from dssl.pipeline.pretrain import build_strategy, optimizer_config, simulator_config, train_schedule
    from dssl.config.mixing import MIXING_SPECS
    from dssl.topology.mixing import DEFAULT_RULE, mixing_matrix

    model = fields["model"]
    method = build(params, model, args.size, channels, device)
    framework = kind.removeprefix("pretrain_")
    schedule = step_schedule(params, framework, fields.get("strategy"))
    if framework in ("fl", "decl"):
        strategy, round_options = build_strategy(dict(params["strategies"][fields["strategy"]]))
    else:
        strategy, round_options = create_strategy("fedavg"), {}
    clients_count = 1  # central and stand-alone training: one client holding the data
    if framework == "fl":
        clients_count = FLConfig.from_dict(
            simulator_config(train_schedule(params, "fl", fields["strategy"]))).clients_per_round
    elif framework == "decl":
        clients_count = DECL_CLIENTS
    per_client = args.steps * args.batch
    images = synthetic(clients_count * per_client, args.size, channels)
    clients = [ClientData(images, np.arange(i * per_client, (i + 1) * per_client)) for i in range(clients_count)]
    common = {**schedule, "rounds": 1 + args.rounds, "local_epochs": 1, "batch_size": args.batch,
              "optimizer": optimizer_config(params, model)}
    reset_peak(device)
    with tempfile.TemporaryDirectory(prefix="dssl-smoke-") as folder:
        if framework == "decl":
            rule = round_options.pop("mixing", DEFAULT_RULE)
            adjacency = ~np.eye(clients_count, dtype=bool)
            mixing = mixing_matrix(adjacency, rule, np.full(clients_count, per_client))
            simulator = DecLSimulator(method, clients, strategy, mixing,
                                      DecLConfig.from_dict({**common, **round_options}),
                                      push_sum=MIXING_SPECS[rule].column_stochastic, checkpoint_dir=folder)
        else:
            config = FLConfig.from_dict({**common, "clients_per_round": clients_count})
            simulator = FLSimulator(method, clients, strategy, config, checkpoint_dir=folder)
        metrics = simulator.run().metrics
    timed = [m for m in metrics[1:] if m["images"]] or [m for m in metrics if m["images"]]
    return {"images_per_s": sum(m["images"] for m in timed) / sum(m["wall_time_s"] for m in timed),
            "checkpoint_bytes": metrics[-1]["checkpoint_bytes"], "peak_mib": peak_memory_mib(device),
            "clients": clients_count}


def step_schedule(params: dict, framework: str, strategy: str | None) -> dict:
    """The stage's training section without its counts: the step options (precision, channels_last,
    compile, ...) and schedule keys the pipeline hands the simulator; rounds, epochs, batch and clients
    are the smoke's own."""
    from dssl.pipeline.pretrain import simulator_config, train_schedule

    counts = ("rounds", "local_epochs", "epochs", "batch_size", "clients_per_round")
    return {k: v for k, v in simulator_config(train_schedule(params, framework, strategy)).items() if k not in counts}


def evaluation_run(args, params: dict, protocol: str, backbone: str, device: torch.device) -> dict:
    """One evaluation protocol on a fresh encoder: BatchNorm re-estimation plus the protocol, timed."""
    from dssl.data.imageset import resized
    from dssl.config.protocols import PROTOCOL_SPECS
    from dssl.evaluation import evaluate
    from dssl.evaluation.batchnorm import reestimate_batchnorm
    from dssl.models import create_backbone
    from dssl.planning.costs import encoder_costs
    from dssl.planning.workload import protocol_work

    section = dict(params["evaluate"].get(protocol) or {})
    spec = PROTOCOL_SPECS[protocol]
    config = spec.make_config(section)
    config = spec.make_config({**section, **few_steps(config, spec.keys, args.batch)})
    count = max(int(round(args.steps * args.batch / (1 - config.val_fraction))), 20)
    train, test = resized(synthetic(count, 32, 3), args.size), resized(synthetic(args.batch, 32, 3, seed=1), args.size)
    torch.manual_seed(0)
    encoder = create_backbone(backbone, args.size, 3).to(device)
    costs = encoder_costs(create_backbone(backbone, args.size, 3), args.size, 3)
    trained, forward, flops = protocol_work(config, len(train), len(test), train.num_classes, costs, True)
    reset_peak(device)
    start = time.perf_counter()
    reestimate_batchnorm(encoder, train)
    evaluate(protocol, encoder, train, test, config, seed=0)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall = time.perf_counter() - start
    return {"images_per_s": (trained + forward) / wall, "flops_per_s": flops / wall,
            "peak_mib": peak_memory_mib(device), "checkpoint_bytes": None}


def few_steps(config, keys: frozenset[str], batch: int) -> dict:
    """A protocol's config cut to one epoch and the first value of each grid, at ``batch``."""
    short: dict = {"epochs": 1} if "epochs" in keys else {}
    if "warmup_epochs" in keys:
        short["warmup_epochs"] = 0  # a warm-up must end before the last epoch: none in a one-epoch run
    for grid in ("lr_grid", "weight_decay_grid"):
        if grid in keys:
            short[grid] = [getattr(config, grid)[0]]
    short.update({key: batch for key in ("batch_size", "feature_batch_size", "query_batch_size") if key in keys})
    return short


def runs(params: dict, each: bool = False) -> list[tuple[str, dict, str]]:
    """(kind, fields of its first stage, backbone): one per pretraining kind and backbone, or with
    ``each`` one per kind, backbone, method and strategy section (every training path the profile has)."""
    from dssl.pipeline.catalogue import instances

    chosen: dict[tuple, dict] = {}
    for instance in instances(params):
        if instance.kind.name in PRETRAIN:
            spec = params["models"][instance.fields["model"]]
            key = (instance.kind.name, spec["backbone"])
            if each:
                key += (spec["method"], instance.fields.get("strategy"))
            chosen.setdefault(key, dict(instance.fields))
    return [(key[0], fields, key[1]) for key, fields in chosen.items()]


def evaluated_backbones(params: dict) -> list[str]:
    from dssl.pipeline.catalogue import instances

    found = []
    for instance in instances(params):
        if instance.kind.name.startswith("evaluate_"):
            fields = instance.fields
            found.append(fields["backbone"] if "backbone" in fields else params["models"][fields["model"]]["backbone"])
    return list(dict.fromkeys(found))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=Path, default=Path("configs/paper.yaml"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=int, help="image side (default 224 on GPU, 28 on CPU)")
    parser.add_argument("--batch", type=int, help="batch size (default 128 on GPU, 4 on CPU)")
    parser.add_argument("--steps", type=int, help="steps per client and round (default 2 on GPU, 1 on CPU)")
    parser.add_argument("--rounds", type=int, default=1, help="timed rounds after the warm-up round")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    parser.add_argument("--each", action="store_true",
                        help="one run per kind, backbone, method and strategy (default: per kind and backbone)")
    args = parser.parse_args()
    defaults = PAPER if args.device.startswith("cuda") else CPU_REDUCED
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main() -> int:
    args = parse_args()
    check_device(args.device)
    torch.set_num_threads(args.threads)
    from dssl.data.datasets import DATASETS
    from dssl.planning.costs import CostCache, model_costs
    from dssl.planning.plan import make_plan

    from dssl.config.checker import ParamsError
    from dssl.planning.plan import load_plan_params

    device = torch.device(args.device)
    start = time.perf_counter()
    cache = CostCache()
    params_path = args.params if args.params.exists() else ROOT / args.params  # from anywhere, or the repository
    try:
        params, _ = load_plan_params(params_path, ROOT)
    except ParamsError as error:
        raise SystemExit(f"paper_smoke.py: {error}") from None
    plan = make_plan(params_path, ROOT, cache=cache)
    dataset = params["pretrain"]["dataset"]
    channels = DATASETS[dataset].image_shape(params["datasets"].get(dataset) or {})[0]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"device: {args.device} ({name}); torch {torch.__version__}; {args.size} px, batch {args.batch}, "
          f"{args.steps} step(s) per client, 1 warm-up + {args.rounds} timed round(s); params {args.params}")
    memory = "peak GPU MiB" if device.type == "cuda" else "peak RSS MiB"
    print(f"{'kind':<18} {'backbone':<18} {'stage':<58} {'images/s':>9} {'TFLOP/s':>8} {memory:>13} {'ckpt/round':>11}")
    rates: dict[tuple[str, str], float] = {}
    failed = 0
    for kind, fields, backbone in runs(params, args.each):
        stage = f"{kind}@{'-'.join(fields[a] for a in ('model', 'partition', 'graph', 'strategy') if a in fields)}"
        try:
            row = train_run(args, params, kind, fields, channels, device)
        except RuntimeError as error:  # a kernel torch refuses (say, no deterministic variant): report, go on
            failed += 1
            print(f"{kind:<18} {backbone:<18} {stage:<58} FAILED: {first_line(error)}", flush=True)
            continue
        rate = row["images_per_s"] * model_costs(params["models"][fields["model"]], args.size, channels, cache).train
        rates.setdefault((kind, backbone), rate)
        clients = f" ({row['clients']} clients)" if kind == "pretrain_decl" else ""
        print(f"{kind:<18} {backbone:<18} {stage:<58} {row['images_per_s']:>9.1f} {rate / 1e12:>8.3f} "
              f"{row['peak_mib']:>13.0f} {mib(row['checkpoint_bytes']) + clients:>11}", flush=True)
    protocols = list(dict.fromkeys(p for names in params["evaluate"]["protocols"].values() for p in names or []))
    for backbone in evaluated_backbones(params):
        for protocol in protocols:
            try:
                row = evaluation_run(args, params, protocol, backbone, device)
            except RuntimeError as error:
                failed += 1
                print(f"{'evaluate':<18} {backbone:<18} {protocol:<58} FAILED: {first_line(error)}", flush=True)
                continue
            rates[f"evaluate:{protocol}", backbone] = row["flops_per_s"]
            print(f"{'evaluate':<18} {backbone:<18} {protocol:<58} {row['images_per_s']:>9.1f} "
                  f"{row['flops_per_s'] / 1e12:>8.3f} {row['peak_mib']:>13.0f} {'-':>11}", flush=True)
    cache.save()
    print_projection(plan, rates, args.size)
    print(f"total wall time: {time.perf_counter() - start:.0f} s")
    if failed:
        print(f"{failed} run(s) FAILED (above)")
    return 1 if failed else 0


def first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


def print_projection(plan, rates: dict, size: int) -> None:
    """The plan's GPU-hours per stage kind, and the same FLOPs at this run's FLOP rate per backbone."""
    print(f"\nprojected GPU-hours of {plan.params_path} ({plan.image_size} px"
          + ("" if size == plan.image_size else f"; this run at {size} px: its rates say little at paper size") + "):")
    print(f"  {'stage kind':<18} {'stages':>6} {'plan GPU-h':>11} {'at this run':>12}")
    kinds = dict.fromkeys(c.kind for c in plan.stages if c.stage in plan.hours)
    for kind in kinds:
        costs = [c for c in plan.stages if c.kind == kind and c.stage in plan.hours]
        at_run = 0.0
        for cost in costs:
            key = (kind, cost.backbone) if kind in PRETRAIN else None
            if key is None:  # evaluation: the slowest protocol run on this backbone
                found = [r for (k, b), r in rates.items() if k.startswith("evaluate:") and b == cost.backbone]
                rate = min(found) if found else None
            else:
                rate = rates.get(key)
            at_run = at_run + cost.total_flops / rate / 3600 if rate and at_run is not None else None
        at_text = f"{at_run:>12,.1f}" if at_run is not None else f"{'-':>12}"
        print(f"  {kind:<18} {len(costs):>6} {sum(plan.hours[c.stage] for c in costs):>11,.1f} {at_text}")
    total = sum(plan.hours.values())
    print(f"  {'all':<18} {len(plan.hours):>6} {total:>11,.1f}")
    for (backbone, option), rate in sorted(plan.rates.items()):
        print(f"  plan throughput {backbone} {option}: {rate.source}")


def mib(value) -> str:
    return "-" if value is None else f"{value / 2**20:,.1f} MiB"


if __name__ == "__main__":
    sys.exit(main())

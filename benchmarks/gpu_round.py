"""Speed of one paper-scale FL round per training-step option: plain, bf16, channels_last, both, compile.

Setting (paper A's Table 1 round): SimSiam on ResNet-18 (``resnet18_imagenet``, SGD) and on Tiny-ViT
(``tiny_vit``, AdamW), 224 px RGB, batch 128, K = 5 clients per round, each training ``--steps`` steps
(one local epoch over ``steps x batch`` synthetic uint8 images) in this project's ``FLSimulator``,
with the step options of ``FLConfig`` (``precision``, ``channels_last``, ``compile``).

Each (model, option) runs in its own Python process, so the peak-memory figure and the compile caches
belong to that combination alone. A process runs one warm-up round (``torch.compile`` compiles, cuDNN
picks kernels, allocators grow) and then ``--rounds`` timed rounds; it prints

- images/s: images of the timed rounds / their wall time (the simulator's per-round ``wall_time_s``:
  local training, uploads and FedAvg; the simulator syncs with the device once per client);
- warm-up s: the first round's wall time, compilation included;
- peak memory: ``torch.cuda.max_memory_allocated`` on GPU; on CPU the process's peak RSS
  (``ru_maxrss``: Python, torch and the synthetic images included, not only training tensors);
- loss: the last round's mean loss, a sanity check that the options train the same model.

On a GPU the rows are also written to ``benchmarks/results/gpu_round.json`` (``--results PATH``: another
file, or the CPU rows too), replacing earlier rows of the same GPU, method, backbone, option, size and
batch. Each row adds the FLOPs per image of the method's training step (``dssl.planning.costs``), so
``images/s x FLOPs per image`` is the FLOP rate the GPU sustained: ``dssl plan`` converts a stage's FLOPs
into GPU-hours with it (``dssl.planning.throughput``).

Default device: cuda when available (paper scale: ``--size 224 --batch 128 --steps 3``); otherwise
CPU at a reduced size (``--size 64 --batch 16 --steps 2``). Aimed at about three minutes, a full
CPU run measured 7-11 minutes on a shared 2-core machine (one process per model and option, each
with ~5 s of imports, a slow first round while oneDNN warms up, and 10-90 s of compilation for
``compile``) and 4.5 minutes on a quiet 2-core AMD EPYC with bf16 instructions (all ten processes); for a quick
check pass ``--models resnet18_imagenet --options plain,compile``. Tiny-ViT uses patch
14 where the size allows it (16 x 16 tokens at 224 px) and otherwise patch size // 8 (8 x 8 tokens at
64 px). On a CPU without bf16 instructions (oneDNN reports no bf16 support: no AVX512-BF16 / AMX)
bf16 kernels fall back to slow reference code (measured on a 2-core AVX2 EPYC: ResNet-18 at 64 px,
0.65 images/s against 36 fp32), so there the bf16 options are skipped unless ``--cpu-bf16``. The CPU
figures check that everything runs; the GPU figures are the ones to read.

    PYTHONPATH=src python benchmarks/gpu_round.py [--device cuda|cpu] [--size 224] [--batch 128]
        [--steps 3] [--rounds 1] [--models resnet18_imagenet,tiny_vit]
        [--options plain,bf16,channels_last,bf16+channels_last,compile] [--cpu-bf16] [--results PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

OPTIONS = ("plain", "bf16", "channels_last", "bf16+channels_last", "compile")
MODELS = ("resnet18_imagenet", "tiny_vit")
CLIENTS = 5
PAPER = {"size": 224, "batch": 128, "steps": 3}
CPU_REDUCED = {"size": 64, "batch": 16, "steps": 2}
RESULTS = Path(__file__).resolve().parent / "results" / "gpu_round.json"
PAPER_PARAMS = Path(__file__).resolve().parents[1] / "configs" / "paper.yaml"


def step_settings(option: str) -> dict:
    """FLConfig step keys of an option name: ``plain`` or flags joined by ``+``."""
    settings: dict = {}
    for flag in filter(None, option.split("+")):
        if flag == "bf16":
            settings["precision"] = "bf16"
        elif flag in ("channels_last", "compile"):
            settings[flag] = True
        elif flag != "plain":
            raise SystemExit(f"unknown option {flag!r} in {option!r}; use plain, bf16, channels_last, compile")
    return settings


def build_method(backbone: str, size: int, method: str, device: torch.device) -> torch.nn.Module:
    from dssl.config.backbones import BACKBONE_SPECS
    from dssl.config.methods import METHOD_SPECS
    from dssl.models.backbones import create_backbone

    overrides = {}
    if backbone == "tiny_vit" and size % BACKBONE_SPECS["tiny_vit"].options().patch_size:
        overrides["patch_size"] = size // 8  # 8 x 8 tokens when patch 14 does not divide the size
    torch.manual_seed(0)
    encoder = create_backbone(backbone, size, 3, **overrides)
    spec = METHOD_SPECS[method]
    return spec.load()(encoder, size, 3, spec.options()).to(device)


def optimizer_for(backbone: str) -> dict:
    """The optimizer recipe ``configs/paper.yaml`` gives the backbone's family (``pretrain.optimizers``, what
    the paper profile's stages train with): SGD for ResNet-18, AdamW without decay on norms and biases for
    Tiny-ViT. A mapping, which ``FLConfig.from_dict`` turns into the optimizer as it does for a stage."""
    from dssl.config.lookups import backbone_family
    from dssl.yamlio import load_yaml

    return load_yaml(PAPER_PARAMS.read_text())["pretrain"]["optimizers"][backbone_family(backbone)]


def synthetic_clients(size: int, steps: int, batch: int) -> list:
    """``CLIENTS`` clients of ``steps x batch`` random uint8 RGB images each (seed 0), one local epoch apart."""
    from dssl.data.imageset import ArrayImageSet
    from dssl.federation import ClientData

    per_client = steps * batch
    rng = np.random.default_rng(0)
    images = ArrayImageSet(rng.integers(0, 256, (CLIENTS * per_client, size, size, 3), dtype=np.uint8),
                           np.zeros(CLIENTS * per_client, dtype=np.int64), 10)
    return [ClientData(images, np.arange(i * per_client, (i + 1) * per_client)) for i in range(CLIENTS)]


def run_one(args: argparse.Namespace, backbone: str, option: str) -> dict:
    """One (model, option): warm-up round + timed rounds in the FL simulator; the figures as a dict."""
    from dssl.federation import FLConfig, FLSimulator, create_strategy

    device = torch.device(args.device)
    clients = synthetic_clients(args.size, args.steps, args.batch)
    config = FLConfig.from_dict(dict(rounds=1 + args.rounds, clients_per_round=CLIENTS, batch_size=args.batch,
                                     optimizer=optimizer_for(backbone), deterministic=args.deterministic,
                                     **step_settings(option)))
    method = build_method(backbone, args.size, args.method, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    metrics = FLSimulator(method, clients, create_strategy("fedavg"), config).run().metrics
    timed = metrics[1:]
    return {
        "model": backbone, "option": option,
        "images_per_s": sum(m["images"] for m in timed) / sum(m["wall_time_s"] for m in timed),
        "round_s": float(np.mean([m["wall_time_s"] for m in timed])),
        "warmup_s": metrics[0]["wall_time_s"],
        "peak_mib": peak_memory_mib(device),
        "loss": timed[-1]["loss"],
    }


def peak_memory_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_isolated(args: argparse.Namespace, backbone: str, option: str) -> dict:
    """``run_one`` in a fresh interpreter: its own peak memory, compile caches and dynamo state."""
    if "bf16" in option and args.device == "cpu" and not (args.cpu_bf16 or cpu_has_bf16()):
        return {"model": backbone, "option": option, "skipped": "this CPU has no bf16 kernels (--cpu-bf16 forces)"}
    command = [sys.executable, __file__, *pass_through(args), "--one", f"{backbone}:{option}"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"model": backbone, "option": option, "error": tail}
    return json.loads(done.stdout.strip().splitlines()[-1])


def cpu_has_bf16() -> bool:
    """Whether oneDNN has native bf16 kernels here (AVX512-BF16 or AMX); otherwise bf16 crawls."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def pass_through(args: argparse.Namespace) -> list[str]:
    flags = ["--device", args.device, "--size", str(args.size), "--batch", str(args.batch),
             "--steps", str(args.steps), "--rounds", str(args.rounds), "--method", args.method,
             "--threads", str(args.threads)]
    return flags + ([] if args.deterministic else ["--no-deterministic"])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=int, help="image side (default 224 on GPU, 64 on CPU)")
    parser.add_argument("--batch", type=int, help="batch size (default 128 on GPU, 16 on CPU)")
    parser.add_argument("--steps", type=int, help="local steps per client (default 3 on GPU, 2 on CPU)")
    parser.add_argument("--rounds", type=int, default=1, help="timed rounds after the warm-up round")
    parser.add_argument("--method", default="simsiam")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--options", default=",".join(OPTIONS))
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    parser.add_argument("--no-deterministic", dest="deterministic", action="store_false",
                        help="cuDNN autotuning and non-deterministic kernels (the pipeline runs deterministic)")
    parser.add_argument("--cpu-bf16", action="store_true", help="run bf16 on a CPU without bf16 kernels too")
    parser.add_argument("--results", type=Path, help="write the rows to this JSON file (default on a GPU: "
                                                     "benchmarks/results/gpu_round.json; on a CPU: none)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # MODEL:OPTION, run in a child process
    args = parser.parse_args()
    defaults = PAPER if args.device.startswith("cuda") else CPU_REDUCED
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def print_header(args: argparse.Namespace) -> None:
    memory = "peak GPU MiB" if args.device.startswith("cuda") else "peak RSS MiB"
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"device: {args.device} ({describe(args.device)}); torch {torch.__version__}, {args.threads} CPU threads")
    print(f"setting: {args.method}, {args.size} px RGB, batch {args.batch}, {CLIENTS} clients x {args.steps} "
          f"steps per round, 1 warm-up + {args.rounds} timed round(s), deterministic={args.deterministic}")
    print(f"{'model':<18} {'option':<19} {'images/s':>9} {'round s':>8} {'warm-up s':>9} {memory:>13} {'loss':>8}",
          flush=True)


def print_row(row: dict) -> None:
    """One result line, printed as soon as its process ends (a full CPU run takes minutes)."""
    head = f"{row['model']:<18} {row['option']:<19}"
    if "error" in row or "skipped" in row:
        print(f"{head} {'FAILED: ' + row['error'] if 'error' in row else 'skipped: ' + row['skipped']}", flush=True)
        return
    print(f"{head} {row['images_per_s']:>9.1f} {row['round_s']:>8.2f} {row['warmup_s']:>9.2f} "
          f"{row['peak_mib']:>13.0f} {row['loss']:>8.4f}", flush=True)


def describe(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return "CPU"


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.one:
        backbone, option = args.one.split(":", 1)
        print(json.dumps(run_one(args, backbone, option)))
        return
    start = time.perf_counter()
    print_header(args)
    rows = []
    for backbone in args.models.split(","):
        flops = flops_per_image(backbone, args.size, args.method)
        for option in args.options.split(","):
            row = run_isolated(args, backbone, option)
            print_row(row)
            if "images_per_s" in row:
                rows.append(result_row(args, row, flops))
    results = args.results or (RESULTS if args.device.startswith("cuda") else None)
    if results is not None and rows:
        from dssl.planning.throughput import merge_results

        merge_results(results, rows)
        print(f"wrote {len(rows)} rows to {results}")
    print(f"total wall time: {time.perf_counter() - start:.0f} s")


def flops_per_image(backbone: str, size: int, method: str) -> float:
    """FLOPs of one training step per image, counted on this very model (``dssl.planning.costs``)."""
    from dssl.planning.costs import method_flops, on_meta_else_cpu

    def measure(device: str) -> float:
        with torch.device(device):
            model = build_method(backbone, size, method, torch.device(device))
        return method_flops(model.train(), size, 3)

    return on_meta_else_cpu(measure)[0]


def result_row(args: argparse.Namespace, row: dict, flops: float) -> dict:
    """A results-file row: what ran where, its images/s and the FLOPs per image behind them."""
    return {"device": args.device, "device_name": describe(args.device), "method": args.method,
            "backbone": row["model"], "option": row["option"], "size": args.size, "batch": args.batch,
            "steps": args.steps, "deterministic": args.deterministic, "images_per_s": row["images_per_s"],
            "peak_mib": row["peak_mib"], "flops_per_image": flops, "torch": torch.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


if __name__ == "__main__":
    main()

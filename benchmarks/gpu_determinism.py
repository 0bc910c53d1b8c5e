"""Does a training run give the same bits twice on this device? Per backbone, method and kernel choice.

The pipeline asks torch for deterministic kernels, strictly (``configure_determinism``:
``warn_only=False``). With ``warn_only=True`` torch only warns where a kernel is not deterministic, and
on a GPU it then runs the attention kernels behind ``scaled_dot_product_attention`` (flash,
memory-efficient, cuDNN) in their non-deterministic form. This script runs the same small FL run twice
per setting and compares the final global models bit for bit:

- ``warn-only``: deterministic kernels with ``warn_only=True`` (how the pipeline ran before it went
  strict; torch picks the attention kernel);
- ``math-attention``: the same, with attention restricted to the math kernel (``sdpa_kernel(MATH)``);
- ``strict``: as the pipeline runs (``warn_only=False``): an op without a deterministic variant raises
  (printed as the error), and the attention kernels take their deterministic paths.

Printed per setting: whether the two runs' final weights are equal, the largest absolute difference,
and the images/s of the last round (the price of the setting). Setting: FedAvg, 5 clients x ``--steps``
steps of ``--batch`` synthetic images per round, ``--rounds`` rounds, SimSiam on ResNet-18
(``resnet18_imagenet``) and on Tiny-ViT, MAE on Tiny-ViT, each with the optimizer ``configs/paper.yaml``
gives its backbone (SGD for ResNet-18, AdamW for Tiny-ViT, lr 1.5e-4 x batch / 256).

    PYTHONPATH=src python benchmarks/gpu_determinism.py [--device cuda] [--size 224] [--batch 64]
        [--steps 2] [--rounds 2] [--settings warn-only,math-attention,strict] [--cases simsiam:tiny_vit,...]
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
# the speed benchmark's models, optimizers (configs/paper.yaml's) and synthetic clients
from gpu_round import CLIENTS, build_method, optimizer_for, synthetic_clients
from paper_smoke import first_line  # a refused run is reported as paper_smoke reports it

CASES = (("simsiam", "resnet18_imagenet"), ("simsiam", "tiny_vit"), ("mae", "tiny_vit"))
SETTINGS = ("warn-only", "math-attention", "strict")


def run_once(args: argparse.Namespace, method_name: str, backbone: str, setting: str) -> tuple[dict, float]:
    """One FL run from seed 0; the final global state (on the CPU) and the last round's images/s."""
    import dssl.federation.simulator as simulator
    from dssl.federation import FLConfig, FLSimulator, create_strategy
    from dssl.training.determinism import configure_determinism

    clients = synthetic_clients(args.size, args.steps, args.batch)
    config = FLConfig.from_dict(dict(rounds=args.rounds, clients_per_round=CLIENTS, batch_size=args.batch,
                                     optimizer=optimizer_for(backbone), deterministic=True))
    method = build_method(backbone, args.size, method_name, torch.device(args.device))

    def warn_only(enabled: bool = True) -> None:
        configure_determinism(enabled)
        torch.use_deterministic_algorithms(enabled, warn_only=True)

    patched = configure_determinism if setting == "strict" else warn_only
    kernels = contextlib.nullcontext()
    if setting == "math-attention":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        kernels = sdpa_kernel(SDPBackend.MATH)
    original, simulator.configure_determinism = simulator.configure_determinism, patched
    try:
        with kernels:
            result = FLSimulator(method, clients, create_strategy("fedavg"), config).run()
    finally:
        simulator.configure_determinism = original
    last = result.metrics[-1]
    state = {k: v.detach().cpu().clone() for k, v in result.final_state.items()}
    return state, last["images"] / last["wall_time_s"]


def compare(first: dict, second: dict) -> tuple[bool, float]:
    """Bitwise equality of two state dicts and the largest absolute difference of their floats."""
    equal = all(torch.equal(first[k], second[k]) for k in first)
    gap = max(((first[k].double() - second[k].double()).abs().max().item() for k in first
               if first[k].is_floating_point() and first[k].numel()), default=0.0)
    return equal, gap


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--cases", default=",".join(f"{m}:{b}" for m, b in CASES), help="method:backbone,...")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    start = time.perf_counter()
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(f"device: {args.device} ({name}); torch {torch.__version__}; {args.size} px, batch {args.batch}, "
          f"{CLIENTS} clients x {args.steps} steps, {args.rounds} rounds; two runs per setting from seed 0")
    print(f"{'method':<8} {'backbone':<18} {'setting':<15} {'same bits':>9} {'max |diff|':>11} {'images/s':>9}",
          flush=True)
    for method_name, backbone in (case.split(":", 1) for case in args.cases.split(",")):
        for setting in args.settings.split(","):
            head = f"{method_name:<8} {backbone:<18} {setting:<15}"
            try:
                (first, rate), (second, _) = (run_once(args, method_name, backbone, setting) for _ in range(2))
            except RuntimeError as error:
                print(f"{head} FAILED: {first_line(error)}", flush=True)
                continue
            equal, gap = compare(first, second)
            print(f"{head} {'yes' if equal else 'no':>9} {gap:>11.3g} {rate:>9.1f}", flush=True)
    print(f"total wall time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()

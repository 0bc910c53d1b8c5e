"""Steady-state fine-tuning speed per backbone with paper A's recipes: the evaluation rows of ``dssl plan``.

``dssl plan`` converts an evaluation stage's FLOPs into GPU-hours with a fine-tuning rate, not with the
pretraining step's (``benchmarks/gpu_round.py``): fine-tuning runs another model (encoder + head),
other augmentations (RandAugment, mixup / cutmix, random erasing), other
batches (1024 on ImageNet) and another data path (32 px CIFAR images resized on the device; ImageNet
gathered from a memory-mapped array). Each case runs this project's fine-tuning step as an evaluation
stage does (``dssl.evaluation.finetune.FineTuning``: its batch reader, augmentation, mixing and
``TrainStep``) with the recipe ``configs/paper.yaml`` resolves for the dataset and backbone family
(``evaluate.finetune`` with ``per_family`` and ``per_dataset``):

- ``cifar``: CIFAR-100-shaped data (random 32 px uint8 images, 100 classes) resized to ``--size`` px,
  batch 256 (``--cifar-batch``);
- ``imagenet``: ImageNet-shaped data (a memory-mapped ``[N, 3, size, size]`` uint8 array, as the
  prepare stage writes, 1000 classes), batch 1024 (``--imagenet-batch``);

each for ResNet-18 (``resnet18_imagenet``: the CNN recipe, SGD, random-resized crop and flip) and
Tiny-ViT (``tiny_vit``: MAE's recipe, RandAugment, mixup / cutmix, random erasing, layer decay, drop
path). ``--warmup`` steps run first and are not timed (kernel selection, allocator growth, compilation);
then ``--steps`` steps are timed between two device synchronisations. A row gives images/s and the
FLOPs per image of a fine-tuning step (the encoder's forward and backward plus the linear head,
``dssl.planning.costs``, as the plan counts them), so their product is the FLOP/s the device sustained.

On a GPU the rows are merged into ``benchmarks/results/finetune_rate.json`` (``--results PATH``: another
file), replacing rows of the same GPU, method, backbone, option, size, batch and dataset; the plan reads
them for evaluation stages (``dssl.planning.throughput``). CPU rows are printed, not written, unless
``--results`` is given: they check that the benchmark runs, they are not rates to plan a GPU with.

    PYTHONPATH=src python benchmarks/finetune_rate.py [--device cuda|cpu] [--steps 300] [--warmup 20]
        [--size 224] [--cases cifar,imagenet] [--models resnet18_imagenet,tiny_vit]
        [--options bf16+channels_last] [--images 2048] [--results PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import math
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

MODELS = ("resnet18_imagenet", "tiny_vit")
CASES = {"cifar": ("cifar100", 100, 32), "imagenet": ("imagenet", 1000, None)}   # dataset, classes, stored px
RESULTS = Path(__file__).resolve().parent / "results" / "finetune_rate.json"
PAPER_PARAMS = Path(__file__).resolve().parents[1] / "configs" / "paper.yaml"
METHOD = "finetune"


def recipe(backbone: str, dataset: str, batch: int, option: str, device: str):
    """The ``FineTuneConfig`` configs/paper.yaml gives ``backbone`` on ``dataset``, at ``batch`` with the step
    option ``option`` on ``device`` (the recipe's own batch and step settings replaced by the benchmark's)."""
    from dssl.config.lookups import backbone_family
    from dssl.config.protocols import PROTOCOL_SPECS
    from dssl.yamlio import load_yaml

    entry = load_yaml(PAPER_PARAMS.read_text())["evaluate"]["finetune"]
    config = PROTOCOL_SPECS["finetune"].make_config(entry, dataset, backbone_family(backbone))
    return dataclasses.replace(config, batch_size=batch, device=device, **step_settings(option))


def step_settings(option: str) -> dict:
    """Step keys of an option name, parsed as gpu_round's (``plain`` or flags joined by ``+``), with every key
    set: an evaluation config's own step options must not show through an option that does not name them."""
    from gpu_round import step_settings as named_flags   # benchmarks/ is the script's folder

    return {"precision": "fp32", "channels_last": False, "compile": False, **named_flags(option)}


def backbone_overrides(backbone: str, size: int) -> dict:
    """Tiny-ViT keeps patch 14 where the size allows it (224 px: 16 x 16 tokens), else 8 x 8 tokens."""
    return {"patch_size": size // 8} if backbone == "tiny_vit" and size % 14 else {}


def synthetic_images(case: str, size: int, count: int, folder: Path):
    """``count`` random images of the case's shape, seed 0: CIFAR in memory, seen at ``size`` px; ImageNet
    as a memory-mapped array at ``size`` px, read as the prepare stage's arrays are."""
    from dssl.data.imageset import ArrayImageSet, MemmapImageSet, resized

    _, classes, stored = CASES[case]
    rng = np.random.default_rng(0)
    labels = rng.integers(0, classes, count)
    if stored is not None:
        return resized(ArrayImageSet(rng.integers(0, 256, (count, stored, stored, 3), dtype=np.uint8), labels,
                                     classes), size)
    path = folder / "images.npy"
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(count, 3, size, size))
    for start in range(0, count, 256):
        array[start:start + 256] = rng.integers(0, 256, array[start:start + 256].shape, dtype=np.uint8)
    array.flush()
    digest = hashlib.md5(memoryview(np.ascontiguousarray(array)).cast("B")).hexdigest()
    del array
    return MemmapImageSet(path, labels, classes, count, [digest])


class _Timed(Exception):
    """Raised by ``TimedStep`` after the last timed step: the fine-tuning run stops there."""


def timed_step(device: torch.device, warmup: int, steps: int):
    """A ``TrainStep`` that starts the clock after ``warmup`` steps (the device synchronised) and stops the
    run after ``steps`` more: the fine-tuning code runs unchanged around it (its reader, augmentation,
    mixing, schedule), and the validation pass at the end of an epoch is never reached."""
    from dssl.training.step import TrainStep

    class TimedStep(TrainStep):
        calls, start, elapsed = 0, 0.0, 0.0

        def __call__(self, batch, loss_fn):
            if self.calls == warmup:
                synchronize(device)
                self.start = time.perf_counter()
            result = super().__call__(batch, loss_fn)
            self.calls += 1
            if self.calls == warmup + steps:
                synchronize(device)
                self.elapsed = time.perf_counter() - self.start
                raise _Timed
            return result

    return TimedStep


def time_case(args: argparse.Namespace, case: str, backbone: str, option: str, folder: Path) -> dict:
    """Warm-up steps, then ``args.steps`` timed steps of a fine-tuning run (``FineTuning``, as an evaluation
    stage runs it, over enough epochs of the synthetic images); the figures as a dict."""
    from unittest import mock

    from dssl.evaluation import finetune
    from dssl.models import create_backbone

    dataset = CASES[case][0]
    batch = args.cifar_batch if case == "cifar" else args.imagenet_batch
    cfg = recipe(backbone, dataset, batch, option, args.device)
    images = synthetic_images(case, args.size, max(args.images, 2 * batch), folder)
    fit = np.arange(len(images) - 1)   # one image left for the validation split the run never reaches
    steps_per_epoch = math.ceil(len(fit) / batch)
    epochs = math.ceil((args.warmup + args.steps) / steps_per_epoch) + 1
    cfg = dataclasses.replace(cfg, epochs=epochs, warmup_epochs=0, eval_every=epochs + 1)   # no validation pass
    device = torch.device(args.device)
    torch.manual_seed(0)
    encoder = create_backbone(backbone, args.size, 3, **backbone_overrides(backbone, args.size)).to(device)
    run = finetune.FineTuning(encoder, images, cfg, fit, np.array([len(images) - 1]), seed=0)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    # the run builds its step (optimizer, bf16, channels-last, compile) as a stage does, timed
    with mock.patch.object(finetune, "TrainStep", timed_step(device, args.warmup, args.steps)):
        try:
            run.select()
            raise RuntimeError(f"the run ended before {args.warmup + args.steps} steps")
        except _Timed:
            pass
    elapsed = run.step.elapsed
    flops = finetune_flops(backbone, args.size, CASES[case][1])
    rate = args.steps * batch / elapsed
    return {"case": case, "dataset": dataset, "model": backbone, "option": option, "batch": batch,
            "images_per_s": rate, "flops_per_image": flops, "flops_per_s": rate * flops,
            "step_s": elapsed / args.steps, "peak_mib": peak_memory_mib(device),
            "recipe": recipe_text(cfg)}


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def finetune_flops(backbone: str, size: int, classes: int) -> float:
    """FLOPs per image of a fine-tuning step: the encoder's forward and backward (counted on the model,
    ``dssl.planning.costs``) plus the linear head's 6 d C, as ``dssl.planning.workload`` counts them."""
    from dssl.models import create_backbone
    from dssl.planning.costs import encoder_costs, on_meta_else_cpu

    def measure(device: str):
        with torch.device(device):
            encoder = create_backbone(backbone, size, 3, **backbone_overrides(backbone, size))
        return encoder_costs(encoder, size, 3)

    costs = on_meta_else_cpu(measure)[0]
    return costs.train + 6 * costs.feature_dim * classes


def recipe_text(cfg) -> str:
    """The recipe's augmentation and optimiser, in a few words (printed and written with the row)."""
    parts = [cfg.optimizer, f"crop {cfg.crop}" + (" + flip" if cfg.hflip else "")]
    parts += [f"RandAugment {cfg.rand_augment}"] if cfg.rand_augment else []
    parts += [f"mixup {cfg.mixup} / cutmix {cfg.cutmix}"] if cfg.mixes else []
    parts += [f"random erasing {cfg.random_erasing}"] if cfg.random_erasing > 0 else []
    parts += [f"layer decay {cfg.layer_decay}"] if cfg.layer_decay < 1 else []
    parts += [f"drop path {cfg.drop_path}"] if cfg.drop_path > 0 else []
    return ", ".join(parts)


def peak_memory_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def describe(device: str) -> str:
    return torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "CPU"


def result_row(args: argparse.Namespace, row: dict) -> dict:
    """A results-file row, keyed as gpu_round's (``throughput.RESULT_KEYS``) plus its dataset."""
    return {"device": args.device, "device_name": describe(args.device), "method": METHOD,
            "dataset": row["dataset"], "backbone": row["model"], "option": row["option"], "size": args.size,
            "batch": row["batch"], "steps": args.steps, "warmup": args.warmup,
            "images_per_s": row["images_per_s"], "flops_per_image": row["flops_per_image"],
            "peak_mib": row["peak_mib"], "recipe": row["recipe"], "torch": torch.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=300, help="timed steps per case (after the warm-up)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    parser.add_argument("--size", type=int, default=224, help="the model's input side in px")
    parser.add_argument("--cases", default=",".join(CASES), help="cifar and/or imagenet")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--options", default="bf16+channels_last",
                        help="step options, comma-separated (configs/paper.yaml fine-tunes with bf16+channels_last)")
    parser.add_argument("--cifar-batch", type=int, default=256)
    parser.add_argument("--imagenet-batch", type=int, default=1024)
    parser.add_argument("--images", type=int, default=2048, help="synthetic images per case (at least 2 batches)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    parser.add_argument("--results", type=Path, help="write the rows to this JSON file (default on a GPU: "
                                                     "benchmarks/results/finetune_rate.json; on a CPU: none)")
    args = parser.parse_args(argv)
    for name in ("steps", "size", "cifar_batch", "imagenet_batch", "images", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must be >= 0, got {args.warmup}")
    unknown = [c for c in args.cases.split(",") if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda but torch sees no CUDA device; run on a GPU machine or pass --device cpu")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    begun = time.perf_counter()
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"device: {args.device} ({describe(args.device)}); torch {torch.__version__}; {args.size} px; "
          f"{args.warmup} warm-up + {args.steps} timed steps per case")
    print(f"{'case':<9} {'model':<18} {'option':<19} {'batch':>5} {'images/s':>9} {'TFLOP/s':>8} "
          f"{'step s':>7} {'peak MiB':>9}  recipe", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="finetune-rate-") as folder:
        for case in args.cases.split(","):
            for backbone in args.models.split(","):
                for option in args.options.split(","):
                    row = time_case(args, case, backbone, option, Path(folder))
                    print(f"{case:<9} {backbone:<18} {option:<19} {row['batch']:>5} {row['images_per_s']:>9.1f} "
                          f"{row['flops_per_s'] / 1e12:>8.3f} {row['step_s']:>7.3f} {row['peak_mib']:>9.0f}  "
                          f"{row['recipe']}", flush=True)
                    rows.append(result_row(args, row))
    results = args.results or (RESULTS if args.device.startswith("cuda") else None)
    if results is not None:
        from dssl.planning.throughput import EVAL_KEYS, merge_results

        merge_results(results, rows, EVAL_KEYS)
        print(f"wrote {len(rows)} rows to {results}")
    print(f"total wall time: {time.perf_counter() - begun:.0f} s")


if __name__ == "__main__":
    main()

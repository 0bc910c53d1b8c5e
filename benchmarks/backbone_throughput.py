"""Training-step cost of a profile's models on one core: images/s, ms a step, and the part no batch shrinks.

Each row is a model of the params file (its method, backbone and hyper-parameters over the pretraining
dataset's view defaults) at the profile's image size and FL batch, trained as a stage's task trains it:
one thread, ``zero_grad -> loss -> backward -> step`` with its backbone family's optimizer
(``pretrain.optimizers``), on random images. "ms at batch 2" is the same step on two images (the fewest a
BatchNorm trains on): nearly all of it is the cost of a step that does not grow with the batch (Python,
operator dispatch, the optimizer's per-tensor loop).
"backbone" rows time the bare encoder with a sum-of-features loss. The last line times one matrix
product of a ViT step's shape ([288, 96] x [96, 288]: the qkv projection of 32 images' 9 visible tokens
at vit_small's width) as what this core's GEMM kernels give.

    .venv/bin/python benchmarks/backbone_throughput.py [--params params.yaml] [--models mae-vit ...]
        [--batch-size N] [--seconds S]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from dssl.config.params import read_params
from dssl.config.sections import backbone_family
from dssl.data.datasets import DATASETS
from dssl.federation.local import OptimizerConfig, build_optimizer
from dssl.methods import create_method
from dssl.models import create_backbone

DEFAULT_MODELS = ("simsiam-cnn", "mae-cnn", "mae-vit")   # the models Table 1 and Fig. 2a read
GEMM_SHAPE = (288, 96, 288)


SMALLEST_BATCH = 2   # a BatchNorm cannot train on one image


@dataclass
class Step:
    """What a task trains: the module, its loss on a batch, its optimizer recipe and its images' channels."""

    module: nn.Module
    loss: Callable[[torch.Tensor], torch.Tensor]
    recipe: OptimizerConfig
    in_chans: int


def build_step(params: dict, model: str) -> Step:
    """``model``: a name of ``params["models"]``, or ``backbone:<name>`` for a bare backbone."""
    pretrain = params["pretrain"]
    dataset = DATASETS[pretrain["dataset"]]
    in_chans = dataset.prepared_shape(params["datasets"][pretrain["dataset"]] or {})[0]
    if model.startswith("backbone:"):
        backbone = model.split(":", 1)[1]
        module = create_backbone(backbone, pretrain["image_size"], in_chans)
        loss = lambda x: module(x).sum()   # noqa: E731
    else:
        spec = params["models"][model]
        backbone = spec["backbone"]
        module = create_method(spec["method"], backbone, pretrain["image_size"], in_chans,
                               **{**dataset.view_hparams, **spec.get("hparams", {})})
        loss = lambda x: module.training_loss(x)["loss"]   # noqa: E731
    return Step(module, loss, OptimizerConfig(**pretrain["optimizers"][backbone_family(backbone)]), in_chans)


def seconds_per_step(task: Step, batch: torch.Tensor, warmup: int, min_seconds: float) -> float:
    """Warm up, then time whole training steps until ``min_seconds`` have passed."""
    task.module.train()
    optimizer = build_optimizer(task.module, task.recipe, task.recipe.lr(batch.shape[0]))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        task.loss(batch).backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < min_seconds or steps == 0:
        step()
        steps += 1
    return elapsed / steps


def gemm_gflops(min_seconds: float) -> float:
    m, k, n = GEMM_SHAPE
    a, b = torch.rand(m, k), torch.rand(k, n)
    for _ in range(10):
        a @ b
    products, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < min_seconds or products == 0:
        a @ b
        products += 1
    return 2 * m * k * n * products / elapsed / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--models", nargs="+", default=[*DEFAULT_MODELS, "backbone:cnn_small", "backbone:vit_small"],
                        help="names of the params file's models, or backbone:<name>")
    parser.add_argument("--batch-size", type=int, help="default: the params file's pretrain.fl.train.batch_size")
    parser.add_argument("--threads", type=int, default=1, help="a stage's task trains on one thread")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per case and batch size")
    args = parser.parse_args()

    params = read_params(args.params)
    unknown = [m for m in args.models if not m.startswith("backbone:") and m not in params["models"]]
    if unknown:
        parser.error(f"--models: {unknown} are not models of {args.params}; known: {', '.join(params['models'])}")
    batch_size = args.batch_size or params["pretrain"]["fl"]["train"]["batch_size"]
    torch.set_num_threads(args.threads)
    side = params["pretrain"]["image_size"]
    print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()} kernels), {args.threads} thread(s), "
          f"{side} x {side} px, batch {batch_size}")
    print(f"{'model':<20} {'img/s':>8} {'ms/step':>8} {'ms at batch ' + str(SMALLEST_BATCH):>14}")
    for model in args.models:
        torch.manual_seed(0)
        task = build_step(params, model)
        full, smallest = (seconds_per_step(task, torch.rand(size, task.in_chans, side, side), args.warmup, args.seconds)
                          for size in (batch_size, SMALLEST_BATCH))
        print(f"{model:<20} {batch_size / full:8.0f} {full * 1e3:8.2f} {smallest * 1e3:14.2f}")
    print(f"GEMM {GEMM_SHAPE[0]}x{GEMM_SHAPE[1]} @ {GEMM_SHAPE[1]}x{GEMM_SHAPE[2]}: {gemm_gflops(args.seconds):.1f} GFLOP/s")


if __name__ == "__main__":
    main()

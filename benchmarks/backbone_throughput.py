"""Training-step cost of a profile's models on one core: images/s, ms a step, and the part no batch shrinks.

Each row is a model of the params file (its method, backbone and hyper-parameters over the pretraining
dataset's view defaults) at the profile's image size and FL batch, stepped as a stage's task steps it:
one thread, the pipeline's ``TrainStep`` (loss, backward, the backbone family's optimizer from
``pretrain.optimizers``, the method's after-step update), on random images. "ms at batch 2" is the same
step on two images (the fewest a BatchNorm trains on): nearly all of it is the cost of a step that does
not grow with the batch (Python, operator dispatch, the optimizer's per-tensor loop). ``--compile``
steps with ``compile: true`` (``torch.compile``, inductor's C++ kernels on a CPU) and adds the first
step's seconds, which include compiling (inductor caches what it compiled: the second process to compile
the same model pays less). The last line times one matrix product of a ViT step's shape ([288, 96] x
[96, 288]: the qkv projection of 32 images' 9 visible tokens at vit_small's width) as what this core's
GEMM kernels give.

    .venv/bin/python benchmarks/backbone_throughput.py [--params params.yaml] [--models mae-vit ...]
        [--batch-size N] [--seconds S] [--compile]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from dssl.config.params import read_params
from dssl.data.datasets import DATASETS
from dssl.federation.local import OptimizerConfig, build_optimizer
from dssl.methods import create_method
from dssl.pipeline.pretrain import method_hparams, optimizer_config
from dssl.training.options import StepOptions
from dssl.training.step import TrainStep

DEFAULT_MODELS = ("simsiam-cnn", "mae-cnn", "mae-vit")   # the models Table 1 and Fig. 2a read
SMALLEST_BATCH = 2   # a BatchNorm cannot train on one image
GEMM_SHAPE = (288, 96, 288)


def build_method(params: dict, model: str) -> tuple[nn.Module, OptimizerConfig, int]:
    """Model ``model`` of the params file as a stage builds it, its optimizer recipe and its images' channels."""
    pretrain, spec = params["pretrain"], params["models"][model]
    dataset = DATASETS[pretrain["dataset"]]
    in_chans = dataset.prepared_shape(params["datasets"][pretrain["dataset"]] or {})[0]
    method = create_method(spec["method"], spec["backbone"], pretrain["image_size"], in_chans,
                           **method_hparams(params, model))
    return method, OptimizerConfig.from_dict(optimizer_config(params, model)), in_chans


def time_steps(method: nn.Module, recipe: OptimizerConfig, batch: torch.Tensor, options: StepOptions,
               warmup: int, min_seconds: float) -> tuple[float, float]:
    """Seconds of the first step (compiling, when asked) and of a step after ``warmup`` more, timed until
    ``min_seconds`` have passed."""
    method.train()
    step = TrainStep(method, build_optimizer(method, recipe, recipe.lr(batch.shape[0])), options)
    start = time.perf_counter()
    step(batch, method.training_loss)
    first = time.perf_counter() - start
    for _ in range(warmup):
        step(batch, method.training_loss)
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < min_seconds or steps == 0:
        step(batch, method.training_loss)
        steps += 1
    return first, elapsed / steps


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
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), help="names of the params file's models")
    parser.add_argument("--batch-size", type=int, help="default: the params file's pretrain.fl.train.batch_size")
    parser.add_argument("--threads", type=int, default=1, help="a stage's task trains on one thread")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per model and batch size")
    parser.add_argument("--compile", action="store_true", help="step with compile: true (torch.compile)")
    args = parser.parse_args()

    params = read_params(args.params)
    unknown = [m for m in args.models if m not in params["models"]]
    if unknown:
        parser.error(f"--models: {unknown} are not models of {args.params}; known: {', '.join(params['models'])}")
    batch_size = args.batch_size or params["pretrain"]["fl"]["train"]["batch_size"]
    options = StepOptions(compile=args.compile)
    torch.set_num_threads(args.threads)
    side = params["pretrain"]["image_size"]
    print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()} kernels), {args.threads} thread(s), "
          f"{side} x {side} px, batch {batch_size}, {'compiled' if args.compile else 'eager'}")
    print(f"{'model':<16} {'img/s':>8} {'ms/step':>8} {'ms at batch ' + str(SMALLEST_BATCH):>14}"
          + (f" {'first step s':>13}" if args.compile else ""))
    for model in args.models:
        torch.manual_seed(0)
        method, recipe, in_chans = build_method(params, model)
        (first, full), (_, smallest) = (
            time_steps(method, recipe, torch.rand(size, in_chans, side, side), options, args.warmup, args.seconds)
            for size in (batch_size, SMALLEST_BATCH))
        print(f"{model:<16} {batch_size / full:8.0f} {full * 1e3:8.2f} {smallest * 1e3:14.2f}"
              + (f" {first:13.1f}" if args.compile else ""))
    print(f"GEMM {GEMM_SHAPE[0]}x{GEMM_SHAPE[1]} @ {GEMM_SHAPE[1]}x{GEMM_SHAPE[2]}: "
          f"{gemm_gflops(args.seconds):.1f} GFLOP/s")


if __name__ == "__main__":
    main()

"""Training throughput (images/s, forward + backward) of the embedded-profile backbones and methods.

Default: batch 64, 2 threads, 16x16 single-channel images, as the embedded CPU profile runs. Each row
times ``zero_grad -> loss -> backward`` on random images; "backbone" rows time the bare encoder with a
sum-of-features loss, method rows time ``training_loss`` (views, heads and loss included), counting
input images, not views.

    PYTHONPATH=src python benchmarks/backbone_throughput.py [--batch-size 64] [--threads 2]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from torch import nn

from dssl.methods import create_method
from dssl.models import create_backbone

CASES = (
    ("cnn_small", "backbone"),
    ("cnn_small", "simsiam"),
    ("cnn_small", "mae_cnn"),
    ("vit_small", "backbone"),
    ("vit_small", "simsiam"),
    ("vit_small", "mae"),
)


def build_step(
    backbone: str, method: str, image_size: int, in_chans: int
) -> tuple[nn.Module, Callable[[torch.Tensor], torch.Tensor]]:
    """The module to train and a function mapping a batch to its scalar loss."""
    if method == "backbone":
        model = create_backbone(backbone, image_size, in_chans)
        return model, lambda x: model(x).sum()
    model = create_method(method, backbone, image_size, in_chans)
    return model, lambda x: model.training_loss(x)["loss"]


def images_per_second(
    model: nn.Module,
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    batch: torch.Tensor,
    warmup: int,
    min_seconds: float,
) -> float:
    """Warm up, then time whole steps until ``min_seconds`` have passed; input images per second."""
    model.train()
    for _ in range(warmup):
        model.zero_grad(set_to_none=True)
        loss_fn(batch).backward()
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < min_seconds:
        model.zero_grad(set_to_none=True)
        loss_fn(batch).backward()
        steps += 1
    return steps * batch.shape[0] / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=16)
    parser.add_argument("--in-chans", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per case")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    batch = torch.rand(args.batch_size, args.in_chans, args.image_size, args.image_size)
    print(f"torch {torch.__version__}, {args.threads} threads, batch {args.batch_size}, "
          f"{args.in_chans} x {args.image_size} x {args.image_size}")
    print(f"{'backbone':<10} {'method':<9} {'img/s':>8}")
    for backbone, method in CASES:
        model, loss_fn = build_step(backbone, method, args.image_size, args.in_chans)
        rate = images_per_second(model, loss_fn, batch, args.warmup, args.seconds)
        print(f"{backbone:<10} {method:<9} {rate:8.0f}")


if __name__ == "__main__":
    main()

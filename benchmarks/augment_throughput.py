"""Images per second of the ViT fine-tuning recipe's augmentation at 224 px on one CPU core: batched in
torch (``dssl.evaluation.batch_augment``, as fine-tuning runs it) against timm's per-image pipeline (MAE's
``create_transform``: random-resized crop and flip, RandAugment, to tensor and normalise, random erasing,
in PIL image by image; then timm's ``Mixup`` on the batch).

Both start from CIFAR-shaped uint8 images (32 px, the stored form) and end with a mixed [B, 3, 224, 224]
float batch and its soft targets; the recipe is ``configs/paper.yaml``'s ViT one (random-resized crop,
flip, ``rand-m9-mstd0.5-inc1``, random erasing 0.25, mixup 0.8 / cutmix 1.0, label smoothing 0.1). On
an accelerator the batched path runs on the device; this benchmark measures the host's share only, the
figure that bounds a per-image reader thread.

    python benchmarks/augment_throughput.py [--batch 64] [--seconds 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

RECIPE = {"crop": "resized", "hflip": True, "rand_augment": "rand-m9-mstd0.5-inc1", "random_erasing": 0.25,
          "mixup": 0.8, "cutmix": 1.0, "label_smoothing": 0.1}
STORED, SIZE, CLASSES = 32, 224, 100


def cifar_like(count: int) -> np.ndarray:
    """Smooth random colour images ``[N, 32, 32, 3]`` (low-resolution noise upsampled), seed 0."""
    small = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (count, 3, 8, 8)).astype(np.float32))
    full = torch.nn.functional.interpolate(small, size=(STORED, STORED), mode="bilinear", align_corners=False)
    return full.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()


def batched(images: np.ndarray, labels: torch.Tensor):
    """A callable making one mixed batch the way fine-tuning does (``finetune.augment`` and the mixing)."""
    from dssl.evaluation.batch_augment import apply_mix, mix_params, parse_rand_augment
    from dssl.evaluation.configs import FineTuneConfig
    from dssl.evaluation.finetune import augment

    cfg = FineTuneConfig(**RECIPE)
    spec = parse_rand_augment(cfg.rand_augment)
    pixels = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    generator = torch.Generator().manual_seed(0)

    def run() -> torch.Tensor:
        views = augment(pixels.float().div_(255), cfg, generator, SIZE, spec, "bicubic")
        params = mix_params(SIZE, SIZE, cfg.mixup, cfg.cutmix, cfg.mixup_prob, cfg.mixup_switch_prob, generator)
        return apply_mix(views, labels, CLASSES, cfg.label_smoothing, params)[0]
    return run


def per_image(images: np.ndarray, labels: torch.Tensor):
    """A callable making one mixed batch with timm's per-image transform (MAE's ``build_transform``)."""
    from PIL import Image
    from timm.data import create_transform
    from timm.data.mixup import Mixup

    transform = create_transform(SIZE, is_training=True, color_jitter=None, auto_augment=RECIPE["rand_augment"],
                                 interpolation="bicubic", re_prob=RECIPE["random_erasing"], re_mode="pixel",
                                 re_count=1, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    mixer = Mixup(mixup_alpha=RECIPE["mixup"], cutmix_alpha=RECIPE["cutmix"], label_smoothing=RECIPE["label_smoothing"],
                  num_classes=CLASSES)
    for step in transform.transforms:   # magnitude 10 posterizes to 0 bits, which Pillow >= 10 refuses
        for op in getattr(step, "ops", []):
            op.magnitude_max = 9.99
    pictures = [Image.fromarray(image) for image in images]

    def run() -> torch.Tensor:
        batch = torch.stack([transform(picture) for picture in pictures])
        return mixer(batch, labels)[0]
    return run


def rate(run, count: int, seconds: float) -> float:
    """Images per CPU second of ``run`` (one batch of ``count`` per call) after one warm-up call. CPU time
    of this process, single-threaded: one core's work, unaffected by other processes on a shared machine."""
    run()
    done, start = 0, time.process_time()
    while time.process_time() - start < seconds:
        run()
        done += count
    return done / (time.process_time() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=64, help="images per batch (even: timm's Mixup needs it)")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed CPU seconds per path")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: one core)")
    args = parser.parse_args()
    if args.batch < 2 or args.batch % 2:
        raise SystemExit(f"--batch must be an even number >= 2 (timm's Mixup mixes pairs), got {args.batch}")
    torch.set_num_threads(args.threads)
    images = cifar_like(args.batch)
    labels = torch.from_numpy(np.random.default_rng(1).integers(0, CLASSES, args.batch))
    print(f"ViT recipe augmentation, CIFAR-shaped uint8 {STORED} px -> {SIZE} px, batch {args.batch}, "
          f"{args.threads} torch thread(s), torch {torch.__version__}, {platform.processor() or platform.machine()}")
    paths = {"batched (torch, dssl.evaluation.batch_augment)": batched,
             "per image (timm create_transform + Mixup)": per_image}
    figures = {name: rate(make(images, labels), args.batch, args.seconds) for name, make in paths.items()}
    for name, value in figures.items():
        print(f"  {name:50s} {value:8.1f} images per CPU second")
    values = list(figures.values())
    print(f"  batched / per image: {values[0] / values[1]:.2f}x")


if __name__ == "__main__":
    main()

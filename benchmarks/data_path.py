"""Data path: decoding JPEGs every epoch (torchvision ImageFolder) vs the prepared memory-mapped array.

Setting: ``--images`` synthetic JPEGs of 224 x 224 px (smooth random colour fields plus noise, quality
90, ``--classes`` class folders) written to a temporary folder laid out as Mini-ImageNet
(``train/<class>/*.jpg``, plus a small ``test/``). Both sides deliver the same tensors: shuffled
batches of ``--batch`` float32 ``[B, 3, 224, 224]`` images, scaled to [0, 1] and normalised with the
ImageNet mean and std, through a ``torch.utils.data.DataLoader`` with ``--workers`` worker processes.

(a) ``torchvision.datasets.ImageFolder`` + ``Resize(224)``, ``CenterCrop(224)``, ``ToTensor``,
    ``Normalize``: every epoch opens, decodes and converts every JPEG (the usual recipe).
(b) the prepare stage's output (``DATASETS["mini_imagenet"].prepare``: each JPEG decoded once into
    ``train.npy``, uint8 ``[N, 3, 224, 224]``), read through ``MemmapImageSet.get_batch``: each worker
    fetches a whole batch as one gather from the memory-mapped file, then uint8 -> float and normalise.

Printed per line: images/s of each epoch and images per CPU-second (this process and its workers,
all epochs; a busy shared machine disturbs it much less than the wall-clock rate). Then the one-off
preparation time (decode + write + manifest), the load time (open + block-checksum verification, paid
once per process before the first batch) and ``prepared_speedup``: images/s of (b) / of (a), each the
median over the epochs after the first (which also starts the workers). Target >= 5.

Also printed: (c) the float batches of (b) built in the main process without workers, and (a) and
(b) delivering uint8 batches instead (``PILToTensor``; the normalisation then runs on the device, as
in this project's training loop, which gathers uint8 and converts after the copy to the device).

What remains of (b)'s cost with float output is mostly moving each float32 batch (64 x 588 KiB =
37 MiB) from a worker to the main process: fresh shared memory per batch, whose page faults and
zeroing cost more than the gather and the normalisation together; (a) pays the same transfer on top
of its decoding. The array was just written, so (b) reads from the page cache, as it does from the
second epoch of a training run whose array fits in memory (Mini-ImageNet at 224 px: 60,000 x 147 KiB
= 8.4 GiB). Real Mini-ImageNet / ImageNet JPEGs are larger than 224 px (about 500 x 375), so decoding
every epoch costs more there than here.

Measured on a shared 2-core machine (load average 20-25), defaults: (a) 134-186 images/s (451 per
CPU-s), (b) 367-513 (1145 per CPU-s), prepared_speedup 3.2x (CPU time per image 2.5x); uint8 output
5.5x (CPU time 5.0x); preparation 7.8 s for 2,020 images, load + verification 1.3 s for 287 MiB.

    PYTHONPATH=src python benchmarks/data_path.py [--images 2000] [--workers 2] [--batch 64] [--epochs 3]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, get_worker_info

from dssl.data.datasets import DATASETS, load_split
from dssl.data.imageset import ImageSet

SIZE = 224
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def write_jpegs(root: Path, split: str, count: int, classes: int, seed: int) -> None:
    """``count`` JPEGs of SIZE px: a bilinear-upsampled 8 x 8 colour field plus noise (photo-like size)."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        field = Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).resize((SIZE, SIZE), Image.BILINEAR)
        noise = rng.integers(-12, 13, (SIZE, SIZE, 3))
        pixels = np.clip(np.asarray(field, dtype=np.int16) + noise, 0, 255).astype(np.uint8)
        path = root / split / f"class{i % classes:03d}" / f"img{i:06d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(path, quality=90)


class PreparedBatches(Dataset):
    """Item = one whole batch (a list of indices from a BatchSampler), as float normalised tensors.

    In a worker the output is allocated in shared memory (as ``default_collate`` allocates its
    batches), so handing it to the main process copies nothing; uint8 -> float and the per-channel
    normalisation are scalar ops on contiguous planes, several times faster than a broadcast against a
    ``[1, 3, 1, 1]`` tensor. Equal to ``ToTensor`` + ``Normalize`` up to float rounding (~5e-7).
    """

    def __init__(self, images: ImageSet, normalise: bool = True):
        self.images, self.normalise = images, normalise
        self.scale = [1.0 / (255.0 * s) for s in STD]
        self.shift = [m / s for m, s in zip(MEAN, STD)]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        pixels = self.images.get_batch(indices)
        if not self.normalise:
            return pixels, torch.from_numpy(self.images.labels[indices])
        out = _output_tensor(pixels.shape)
        out.copy_(pixels)
        for channel, (scale, shift) in enumerate(zip(self.scale, self.shift)):
            out[:, channel].mul_(scale).sub_(shift)
        return out, torch.from_numpy(self.images.labels[indices])


def _output_tensor(shape: torch.Size) -> torch.Tensor:
    if get_worker_info() is None:
        return torch.empty(shape)
    storage = torch.UntypedStorage._new_shared(shape.numel() * 4)  # what default_collate does
    return torch.empty(0).set_(storage).view(shape)


def image_folder_loader(root: Path, workers: int, batch: int, seed: int, normalise: bool) -> DataLoader:
    from torchvision import datasets, transforms

    to_tensor = [transforms.ToTensor(), transforms.Normalize(MEAN, STD)] if normalise else [transforms.PILToTensor()]
    transform = transforms.Compose([transforms.Resize(SIZE), transforms.CenterCrop(SIZE), *to_tensor])
    folder = datasets.ImageFolder(str(root / "train"), transform=transform)
    return DataLoader(folder, batch_size=batch, shuffle=True, num_workers=workers,
                      generator=torch.Generator().manual_seed(seed), persistent_workers=workers > 0)


def prepared_loader(images: ImageSet, workers: int, batch: int, seed: int, normalise: bool) -> DataLoader:
    sampler = BatchSampler(RandomSampler(range(len(images)), generator=torch.Generator().manual_seed(seed)),
                           batch_size=batch, drop_last=False)
    return DataLoader(PreparedBatches(images, normalise), batch_size=None, sampler=sampler, num_workers=workers,
                      persistent_workers=workers > 0)


def in_process_rates(images: ImageSet, batch: int, epochs: int, seed: int) -> tuple[list[float], float]:
    """(c): the pipeline's own reader, no workers: batches gathered and normalised in this process."""
    dataset, generator = PreparedBatches(images), torch.Generator().manual_seed(seed)
    rates, cpu_start = [], cpu_seconds()
    for _ in range(epochs):
        start, order = time.perf_counter(), torch.randperm(len(images), generator=generator).numpy()
        for lo in range(0, len(order), batch):
            out, _ = dataset[order[lo:lo + batch]]
            assert out.dtype == torch.float32 and out.shape[1:] == (3, SIZE, SIZE)
        rates.append(len(order) / (time.perf_counter() - start))
    return rates, epochs * len(images) / (cpu_seconds() - cpu_start)


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have exited (the epoch's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def epoch_rates(loader: DataLoader, epochs: int) -> tuple[list[float], float]:
    """images/s of each epoch, and images per CPU-second over all epochs.

    Workers persist across epochs, as in a training run: the first epoch pays their start-up. The
    loader is shut down at the end, so its workers' CPU time is counted (``RUSAGE_CHILDREN`` covers
    exited children). On a machine shared with other work, wall-clock rates follow the load; CPU
    time per image much less so."""
    rates, images_total, cpu_start = [], 0, cpu_seconds()
    iterator = iter(())
    for _ in range(epochs):
        start, seen = time.perf_counter(), 0
        iterator = iter(loader)
        for images, _ in iterator:
            assert images.dtype in (torch.float32, torch.uint8) and images.shape[1:] == (3, SIZE, SIZE)
            seen += len(images)
        rates.append(seen / (time.perf_counter() - start))
        images_total += seen
    if hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()  # joins the persistent workers
    return rates, images_total / (cpu_seconds() - cpu_start)


def steady(rates: list[float]) -> float:
    """Median images/s of the epochs after the first (the first also starts the workers)."""
    return statistics.median(rates[1:] or rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--classes", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root, out = Path(tmp) / "mini", Path(tmp) / "prepared"
        start = time.perf_counter()
        write_jpegs(root, "train", args.images, args.classes, seed=0)
        write_jpegs(root, "test", args.classes, args.classes, seed=1)
        generate_s = time.perf_counter() - start
        jpeg_mib = sum(p.stat().st_size for p in root.rglob("*.jpg")) / 2**20

        start = time.perf_counter()
        DATASETS["mini_imagenet"].prepare({"root": str(root), "image_size": SIZE}, out)
        prepare_s = time.perf_counter() - start
        start = time.perf_counter()
        images = load_split(out, "train")
        images.verify()
        load_s = time.perf_counter() - start

        measured = {}
        for normalise in (True, False):
            folder = image_folder_loader(root, args.workers, args.batch, 0, normalise)
            measured["folder", normalise] = epoch_rates(folder, args.epochs)
            prepared = prepared_loader(images, args.workers, args.batch, 0, normalise)
            measured["prepared", normalise] = epoch_rates(prepared, args.epochs)
        own = in_process_rates(images, args.batch, args.epochs, seed=0)
        array_mib = (out / "train.npy").stat().st_size / 2**20

    def line(label: str, result: tuple[list[float], float]) -> str:
        per_epoch = "  ".join(f"{v:7.0f}" for v in result[0])
        return f"{label:<46} images/s per epoch: {per_epoch}   per CPU-s: {result[1]:6.0f}"

    def ratio(normalise: bool) -> tuple[float, float]:
        (folder, folder_cpu), (prepared, prepared_cpu) = measured["folder", normalise], measured["prepared", normalise]
        return steady(prepared) / steady(folder), prepared_cpu / folder_cpu

    print(f"setting: {args.images} JPEGs {SIZE}x{SIZE} ({jpeg_mib:.0f} MiB, written in {generate_s:.1f} s), "
          f"{args.classes} classes, batch {args.batch}, {args.workers} DataLoader workers, {args.epochs} epochs")
    print(line("(a) ImageFolder, float normalised", measured["folder", True]))
    print(line("(b) prepared array, float normalised", measured["prepared", True]))
    print(line("(c) prepared array, float normalised, no workers", own))
    print(line("(a) ImageFolder, uint8 (normalised on device)", measured["folder", False]))
    print(line("(b) prepared array, uint8 (normalised on device)", measured["prepared", False]))
    print(f"one-off preparation: {prepare_s:.1f} s ({(args.images + args.classes) / prepare_s:.0f} images/s, "
          f"array {array_mib:.0f} MiB); load + checksum verification: {load_s:.2f} s")
    uint8_wall, uint8_cpu = ratio(False)
    float_wall, float_cpu = ratio(True)
    print(f"uint8 output: speedup {uint8_wall:.1f}x (CPU time per image {uint8_cpu:.1f}x)")
    print(f"float output: CPU time per image {float_cpu:.1f}x")
    print(f"prepared_speedup: {float_wall:.1f}x")


if __name__ == "__main__":
    main()

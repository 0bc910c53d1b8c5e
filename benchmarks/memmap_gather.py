"""Images/s of a shuffled batch gathered from a prepared memory-mapped array by 1 or N threads.

A synthetic ``[N, 3, S, S]`` uint8 ``.npy`` array (random pixels, seed 0) is read as the prepare stage's
arrays are (``MemmapImageSet``), a batch of ``--batch`` random indices at a time, into one reused buffer
(as ``DeviceBatches`` gathers into a pinned one). ``warm``: the file in the page cache; ``cold``: its pages
dropped before every batch (``posix_fadvise(DONTNEED)``), so every row is a read from the disk, as the
first epoch over a 187 GiB ImageNet array is. Best of ``--repeats`` per setting.

    PYTHONPATH=src python benchmarks/memmap_gather.py [--images 3000] [--size 224] [--batch 256]
        [--threads 1,2,4] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def make_array(path: Path, count: int, size: int) -> None:
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(count, 3, size, size))
    rng = np.random.default_rng(0)
    for start in range(0, count, 256):
        array[start:start + 256] = rng.integers(0, 256, array[start:start + 256].shape, dtype=np.uint8)
    array.flush()


def drop_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def rate(images, batch: int, repeats: int, cold: bool) -> float:
    rng = np.random.default_rng(1)
    out = np.empty((batch, *images.image_shape), np.uint8)
    best = float("inf")
    for _ in range(repeats):
        indices = rng.choice(len(images), batch, replace=False)
        if cold:
            drop_cache(images.path)
        start = time.perf_counter()
        images.get_batch(indices, out=out)
        best = min(best, time.perf_counter() - start)
    return batch / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--threads", default="1,2,4")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from dssl.data.imageset import MemmapImageSet

    with tempfile.TemporaryDirectory(prefix="gather-", dir=".") as folder:
        path = Path(folder) / "images.npy"
        make_array(path, args.images, args.size)
        print(f"{args.images} images of 3x{args.size}x{args.size} ({path.stat().st_size / 2**20:,.0f} MiB), "
              f"batch {args.batch}, {len(os.sched_getaffinity(0))} cores")
        print(f"{'threads':>7} {'warm images/s':>14} {'cold images/s':>14}")
        for threads in map(int, args.threads.split(",")):
            images = MemmapImageSet(path, np.zeros(args.images, np.int64), 1, args.images, ["unchecked"],
                                    gather_threads=threads)
            images.spot_checked = True   # the synthetic array has no checksums to compare
            warm = rate(images, args.batch, args.repeats, cold=False)
            cold = rate(images, args.batch, args.repeats, cold=True)
            print(f"{threads:>7} {warm:>14,.0f} {cold:>14,.0f}", flush=True)


if __name__ == "__main__":
    main()

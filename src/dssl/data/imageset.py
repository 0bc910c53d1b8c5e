"""Image sets: the one interface the training code reads images through.

An ``ImageSet`` holds integer labels and returns batches of uint8 images as ``[B, C, H, W]`` tensors.
Two storage forms sit behind it:

- ``ArrayImageSet``: the whole split in memory (digits, CIFAR); a batch is one fancy-indexing gather.
- ``MemmapImageSet``: a memory-mapped uint8 array on disk (Mini-ImageNet, ImageNet folders, decoded
  once by the prepare stage at the training resolution); a batch is one gather from the mapped file.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from dssl.artifacts import ArtifactError, load_npz, require_file

if TYPE_CHECKING:  # torch costs seconds to import; the data and partition stages never need it
    import torch


class DatasetError(RuntimeError):
    """A dataset is missing, malformed or cannot be fetched; the message says what to put where."""


IndexLike = "Sequence[int] | np.ndarray | torch.Tensor"


def _as_index(indices: IndexLike) -> np.ndarray:
    if hasattr(indices, "cpu"):  # a torch tensor
        indices = indices.cpu().numpy()
    return np.asarray(indices, dtype=np.int64).reshape(-1)


class ImageSet(ABC):
    """Labelled images of one split; ``get_batch`` returns ``torch.uint8`` tensors ``[B, C, H, W]``."""

    def __init__(self, labels: np.ndarray, num_classes: int):
        self.labels = np.asarray(labels, dtype=np.int64)
        self.num_classes = int(num_classes)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    @abstractmethod
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of every image a batch returns."""

    @abstractmethod
    def get_batch(self, indices: IndexLike, out: np.ndarray | None = None) -> torch.Tensor:
        """Images at ``indices`` as a uint8 tensor ``[B, C, H, W]``; written into ``out`` (a uint8 array
        of that shape, e.g. a reused buffer of ``dssl.data.batches``) when given, the tensor then over it."""


class ArrayImageSet(ImageSet):
    """Images held in memory; stored channels-first once so a batch is a single gather."""

    def __init__(self, images_nhwc: np.ndarray, labels: np.ndarray, num_classes: int):
        super().__init__(labels, num_classes)
        if images_nhwc.dtype != np.uint8 or images_nhwc.ndim != 4:
            raise DatasetError(f"expected uint8 images [N, H, W, C], got {images_nhwc.dtype} "
                               f"{images_nhwc.shape}")
        if len(images_nhwc) != len(self.labels):
            raise DatasetError(f"{len(images_nhwc)} images but {len(self.labels)} labels")
        self._images = np.ascontiguousarray(images_nhwc.transpose(0, 3, 1, 2))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self._images.shape[1:])

    def get_batch(self, indices: IndexLike, out: np.ndarray | None = None) -> torch.Tensor:
        return _gather(self._images, _as_index(indices), out)


class MemmapImageSet(ImageSet):
    """Images read from a memory-mapped uint8 ``.npy`` array ``[N, C, H, W]`` (an image folder after
    the prepare stage, see ``dssl.data.prepared_array``); a batch is one gather from the mapped file,
    its rows copied by several threads.

    The array is verified once, where it is made or moved: the prepare stage records the md5 of every
    block of ``chunk_images`` images as it writes them, DVC records the file's md5 and compares it on
    ``dvc status`` and ``dvc checkout``, and ``dssl verify`` (``verify``) checks every block on demand.
    A process that reads it pays only cheap checks: opening checks the header and the file size (a
    truncated or extended copy fails here), and before the first batch the first and last blocks' md5s
    are compared (``spot_check``, at most two blocks, about 64 MiB: the whole ImageNet array is 187 GiB
    and hashing it in every process cost minutes each). Code that only needs the labels (the partition
    stage) never reads the pixels. A file checked once is not read again by this process or its forked
    children (``_CHECKED``, keyed by the file's identity and the checksums expected). Pickling sends the
    path, not the pixels (spawned workers reopen it).
    """

    def __init__(self, path: Path, labels: np.ndarray, num_classes: int, chunk_images: int,
                 chunk_md5: Sequence[str], gather_threads: int | None = None):
        super().__init__(labels, num_classes)
        self.path = Path(path)
        self._images = _open_image_array(self.path, len(self.labels))
        self.chunk_images = int(chunk_images)
        self.chunk_md5 = list(chunk_md5)
        self.gather_threads = gather_threads if gather_threads is not None else default_gather_threads()
        expected_chunks = -(-len(self.labels) // self.chunk_images) if self.chunk_images > 0 else -1
        if expected_chunks != len(self.chunk_md5):
            raise ArtifactError(self.path, f"meta.json lists {len(self.chunk_md5)} block checksums, "
                                           f"{expected_chunks} expected for {len(self.labels)} images")
        identity = self._identity()
        self.verified = (identity, "all") in _CHECKED
        self.spot_checked = self.verified or (identity, "spot") in _CHECKED

    def _identity(self) -> tuple:
        stat = self.path.stat()
        return (str(self.path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns, self.chunk_images,
                tuple(self.chunk_md5))

    def __getstate__(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "_images"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._images = _open_image_array(self.path, len(self.labels))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self._images.shape[1:])

    def spot_blocks(self) -> list[int]:
        """The blocks ``spot_check`` compares: the first and the last."""
        return sorted({0, len(self.chunk_md5) - 1}) if self.chunk_md5 else []

    def spot_check(self) -> None:
        """Compare the first and last blocks' md5s with meta.json (the cheap check before the first batch)."""
        self._check_blocks(self.spot_blocks(), "spot")
        self.spot_checked = True

    def verify(self, workers: int | None = None) -> None:
        """Compare every block's md5 with meta.json (``dssl verify``; threads: hashlib releases the GIL)."""
        self._check_blocks(range(len(self.chunk_md5)), "all", workers)
        self.verified = self.spot_checked = True

    def _check_blocks(self, blocks: Sequence[int], scope: str, workers: int | None = None) -> None:
        blocks = list(blocks)
        digests = _block_md5s(self.path, self._images, self.chunk_images, blocks, workers)
        bad = [block for block, got in zip(blocks, digests) if got != self.chunk_md5[block]]
        if bad:
            first = bad[0] * self.chunk_images
            raise ArtifactError(self.path, f"checksum mismatch in {len(bad)} of {len(blocks)} blocks checked "
                                           f"({len(self.chunk_md5)} in the file; first bad: images {first}.."
                                           f"{first + self.chunk_images - 1}); the file was damaged or edited "
                                           "after the prepare stage wrote it")
        _CHECKED.add((self._identity(), scope))

    def get_batch(self, indices: IndexLike, out: np.ndarray | None = None) -> torch.Tensor:
        if not self.spot_checked:
            self.spot_check()
        return _gather(self._images, _as_index(indices), out, self.gather_threads)


def _block_md5s(path: Path, images: np.memmap, chunk_images: int, blocks: Sequence[int],
                workers: int | None = None) -> list[str]:
    """md5 of each of ``blocks`` (runs of ``chunk_images`` images) of the array file, read with ``pread``."""
    row_bytes = int(np.prod(images.shape[1:]))
    fd = os.open(path, os.O_RDONLY)
    try:
        def digest(block: int) -> str:
            start = block * chunk_images
            count = min(chunk_images, len(images) - start) * row_bytes
            md5, position = hashlib.md5(), images.offset + start * row_bytes
            while count > 0:
                data = os.pread(fd, min(count, 2**24), position)
                if not data:
                    break
                md5.update(data)
                position += len(data)
                count -= len(data)
            return md5.hexdigest()

        with ThreadPoolExecutor(max_workers=workers or min(8, os.cpu_count() or 1)) as pool:
            return list(pool.map(digest, blocks))
    finally:
        os.close(fd)


# A batch of at least this many bytes is gathered by several threads: below it, handing rows to threads
# costs more than it saves (a 224 px image is 147 KiB; a CIFAR-sized batch is gathered in microseconds).
PARALLEL_GATHER_BYTES = 4 * 2**20
MAX_GATHER_THREADS = 8


def default_gather_threads() -> int:
    """Threads a memory-mapped batch is gathered by: this process's cores, at most ``MAX_GATHER_THREADS``."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_GATHER_THREADS, cores))


def _gather(images: np.ndarray, indices: np.ndarray, out: np.ndarray | None, threads: int = 1) -> torch.Tensor:
    """``images[indices]`` as a tensor, written into ``out`` when given (e.g. a pinned host buffer).

    Rows are copied in ascending index order, each to its batch position: no temporary copy of the
    batch, and from a memory-mapped file a shuffled batch becomes forward reads (what read-ahead and a
    disk serve best when the array is not in the page cache). With ``threads`` > 1 and a batch of at
    least ``PARALLEL_GATHER_BYTES``, the ascending order is cut into ``threads`` runs copied at the same
    time (numpy releases the GIL while it copies a row, and a page fault on a cold file then waits in
    one thread only), each run still forward through the file.
    """
    import torch

    if out is None:
        if threads <= 1 or images.itemsize * len(indices) * int(np.prod(images.shape[1:])) < PARALLEL_GATHER_BYTES:
            return torch.from_numpy(np.asarray(images[indices]))
        out = np.empty((len(indices), *images.shape[1:]), images.dtype)
    if out.dtype != images.dtype or out.shape != (len(indices), *images.shape[1:]):
        raise ValueError(f"out must be {images.dtype} {[len(indices), *images.shape[1:]]}, got {out.dtype} "
                         f"{list(out.shape)}")
    order = np.argsort(indices, kind="stable")

    def copy(positions: np.ndarray) -> None:
        for position in positions:
            out[position] = images[indices[position]]

    runs = min(threads, len(order))
    if runs <= 1 or out.nbytes < PARALLEL_GATHER_BYTES:
        copy(order)
    else:
        list(_gather_pool(threads).map(copy, np.array_split(order, runs)))
    return torch.from_numpy(out)


_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}


def _gather_pool(threads: int) -> ThreadPoolExecutor:
    """This process's pool of ``threads`` gather threads (a forked child makes its own: the parent's
    threads do not exist there)."""
    key = (os.getpid(), threads)
    if key not in _POOLS:
        _POOLS[key] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gather")
    return _POOLS[key]


_CHECKED: set[tuple] = set()  # (MemmapImageSet._identity(), "spot" or "all") of arrays whose checksums matched


def _open_image_array(path: Path, count: int) -> np.memmap:
    """The read-only map of a prepared ``.npy`` array, its header and size checked."""
    path = require_file(path)
    try:
        images = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as error:
        raise ArtifactError(path, f"not a readable .npy array, truncated? ({error})") from error
    if not isinstance(images, np.memmap) or images.dtype != np.uint8 or images.ndim != 4:
        raise ArtifactError(path, f"expected a uint8 [N, C, H, W] array, got {images.dtype} {list(images.shape)}")
    if len(images) != count:
        raise ArtifactError(path, f"holds {len(images)} images but its index lists {count}")
    size = path.stat().st_size
    if size != images.offset + images.nbytes:
        raise ArtifactError(path, f"{size} bytes, expected {images.offset + images.nbytes}: truncated or "
                                  "extended after the prepare stage wrote it")
    return images


def save_arrays(path: Path, **arrays: np.ndarray) -> None:
    """Write arrays as an ``.npz`` readable by ``np.load``, with byte-identical output for equal input.

    ``np.savez`` stamps each member with the current time and the creating OS; here every member
    carries a fixed date and the Unix creator, and arrays are stored little-endian, so that DVC sees
    the same content hash whenever and wherever a stage is re-run.
    """
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.create_system = 3
            info.external_attr = 0o644 << 16
            array = np.asarray(arrays[name])
            array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def load_arrays(path: Path, required: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` written by ``save_arrays``; a damaged file is an ``ArtifactError``."""
    return load_npz(path, required)


class ResizedImageSet(ImageSet):
    """Another image set seen at ``size`` x ``size`` pixels (bilinear), e.g. 8 px digits at 16 px.

    Models are built for one input size; datasets come in theirs. Resizing per batch keeps the
    stored data untouched and costs one interpolation of the batch.
    """

    def __init__(self, base: ImageSet, size: int):
        super().__init__(base.labels, base.num_classes)
        self.base = base
        self.size = int(size)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self.base.image_shape[0], self.size, self.size)

    def get_batch(self, indices: IndexLike, out: np.ndarray | None = None) -> torch.Tensor:
        import torch
        import torch.nn.functional as F

        if self.base.image_shape[1:] == (self.size, self.size):
            return self.base.get_batch(indices, out)
        batch = self.base.get_batch(indices)
        resized = F.interpolate(batch.float(), size=(self.size, self.size), mode="bilinear", align_corners=False)
        resized = resized.round_().clamp_(0, 255).to(batch.dtype)
        if out is None:
            return resized
        target = torch.from_numpy(out)
        return target.copy_(resized)


def resized(images: ImageSet, size: int) -> ImageSet:
    """``images`` at ``size`` px (itself when it already has that size)."""
    return images if images.image_shape[1:] == (size, size) else ResizedImageSet(images, size)

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
    the prepare stage, see ``dssl.data.prepared_array``); a batch is one gather from the mapped file.

    Opening checks the header and the file size (a truncated copy fails here). The md5 of every
    block of ``chunk_images`` images is checked once, before the first batch (``verify``): code that
    only needs the labels (the partition stage) never reads the pixels. A file verified once is not
    read again by this process or its forked children (``_VERIFIED``, keyed by the file's identity
    and the checksums expected). Pickling sends the path, not the pixels (spawned workers reopen it).
    """

    def __init__(self, path: Path, labels: np.ndarray, num_classes: int, chunk_images: int,
                 chunk_md5: Sequence[str]):
        super().__init__(labels, num_classes)
        self.path = Path(path)
        self._images = _open_image_array(self.path, len(self.labels))
        self.chunk_images = int(chunk_images)
        self.chunk_md5 = list(chunk_md5)
        expected_chunks = -(-len(self.labels) // self.chunk_images) if self.chunk_images > 0 else -1
        if expected_chunks != len(self.chunk_md5):
            raise ArtifactError(self.path, f"meta.json lists {len(self.chunk_md5)} block checksums, "
                                           f"{expected_chunks} expected for {len(self.labels)} images")
        self.verified = self._identity() in _VERIFIED

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

    def verify(self, workers: int | None = None) -> None:
        """Check every block's md5 against meta.json (threads; hashlib releases the GIL)."""
        row_bytes = int(np.prod(self._images.shape[1:]))
        offset = self._images.offset
        fd = os.open(self.path, os.O_RDONLY)
        try:
            def digest(block: int) -> str:
                start = block * self.chunk_images
                count = min(self.chunk_images, len(self.labels) - start) * row_bytes
                md5, position = hashlib.md5(), offset + start * row_bytes
                while count > 0:
                    data = os.pread(fd, min(count, 2**24), position)
                    if not data:
                        break
                    md5.update(data)
                    position += len(data)
                    count -= len(data)
                return md5.hexdigest()

            with ThreadPoolExecutor(max_workers=workers or min(8, os.cpu_count() or 1)) as pool:
                digests = list(pool.map(digest, range(len(self.chunk_md5))))
        finally:
            os.close(fd)
        bad = [i for i, (got, want) in enumerate(zip(digests, self.chunk_md5)) if got != want]
        if bad:
            first = bad[0] * self.chunk_images
            raise ArtifactError(self.path, f"checksum mismatch in {len(bad)} of {len(digests)} blocks (first: "
                                           f"images {first}..{first + self.chunk_images - 1}); the file was "
                                           "damaged or edited after the prepare stage wrote it")
        self.verified = True
        _VERIFIED.add(self._identity())

    def get_batch(self, indices: IndexLike, out: np.ndarray | None = None) -> torch.Tensor:
        if not self.verified:
            self.verify()
        return _gather(self._images, _as_index(indices), out)


def _gather(images: np.ndarray, indices: np.ndarray, out: np.ndarray | None) -> torch.Tensor:
    """``images[indices]`` as a tensor, written into ``out`` when given.

    Into ``out``, rows are copied in ascending index order, each to its batch position: no temporary
    copy of the batch, and from a memory-mapped file a shuffled batch becomes forward reads (what
    read-ahead and a disk serve best when the array is not in the page cache).
    """
    import torch

    if out is None:
        return torch.from_numpy(np.asarray(images[indices]))
    if out.dtype != images.dtype or out.shape != (len(indices), *images.shape[1:]):
        raise ValueError(f"out must be {images.dtype} {[len(indices), *images.shape[1:]]}, got {out.dtype} "
                         f"{list(out.shape)}")
    for position in np.argsort(indices, kind="stable"):
        out[position] = images[indices[position]]
    return torch.from_numpy(out)


_VERIFIED: set[tuple] = set()  # MemmapImageSet._identity() of arrays whose checksums matched


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

"""Image-folder splits decoded once into a memory-mapped uint8 array (the ``prepare`` stage's work).

Paper A pretrains on Mini-ImageNet at 224 px and fine-tunes on ImageNet; decoding and resizing every
JPEG in every epoch would cost more CPU than the model step on a GPU. The prepare stage therefore
decodes each image once, at the training resolution, into ``<split>.npy``: a plain NumPy array file
of shape ``[N, C, H, W]`` (uint8), which epochs read with ``np.load(mmap_mode="r")``.

Why ``[N, C, H, W]``: a batch is returned as a contiguous uint8 ``[B, C, H, W]`` tensor (the layout
the models read, see ``ImageSet``). Each image is one contiguous block of C*H*W bytes in either
layout, so a random-access gather reads the same pages; channels-first makes that gather the only
copy, where ``[N, H, W, C]`` would add a transposing copy of every batch.

Resize rule (``RESIZE_RULE``): centre square crop and bicubic resize to ``image_size`` (PIL's
``ImageOps.fit``), after JPEG draft decoding at the smallest DCT scale that still covers
``image_size``; greyscale, palette and CMYK images are converted to RGB.

Integrity: the array is written to a temporary name and renamed only when every image decoded; the
md5 of every block of ``chunk_images`` images is recorded (``meta.json``) as the block is written. The
array is verified once, where it is made or moved, not by every process that reads it: the prepare
stage hashes what it writes, DVC records the file's md5 (``dvc status`` and ``dvc checkout`` compare
it) and ``dssl verify <prepared dir>`` (``verify_prepared``) checks every block on demand, e.g. after
copying the folder by hand. A reading process checks the header, the file size and the first and
last blocks (``MemmapImageSet``). Each source file's size and md5 go to ``<split>.csv``.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from dssl.artifacts import read_json
from dssl.data.imageset import DatasetError, MemmapImageSet

RESIZE_RULE = ("RGB; JPEG draft decoding at the smallest scale >= image_size; centre square crop and "
               "bicubic resize to image_size x image_size (PIL ImageOps.fit)")
LAYOUT = "NCHW"
CHUNK_BYTES = 32 * 2**20  # images per checksum block: about 32 MiB of pixels
MAX_LISTED_ERRORS = 10


@dataclass(frozen=True)
class SourceRecord:
    """One decoded source file: its size in bytes and md5 (the manifest row beside its label)."""

    size: int
    md5: str


@dataclass(frozen=True)
class WrittenArray:
    """What ``write_image_array`` wrote: the per-file records and the block checksums."""

    records: list[SourceRecord]
    chunk_images: int
    chunk_md5: list[str]
    shape: tuple[int, int, int, int]


class ImageDecodeError(DatasetError):
    """One or more source images could not be decoded; the message lists them and the fix."""


def decode_image_bytes(data: bytes, size: int) -> np.ndarray:
    """Encoded image bytes as uint8 ``[size, size, 3]`` (``RESIZE_RULE``); raises OSError on bad data."""
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as image:
        # JPEG can decode at a reduced scale (still >= the target); full-size ImageNet decodes
        # would otherwise dominate the cost of a small-resolution image.
        image.draft("RGB", (size, size))
        rgb = image.convert("RGB")
    square = ImageOps.fit(rgb, (size, size), method=Image.Resampling.BICUBIC)
    return np.asarray(square, dtype=np.uint8)


def chunk_images_for(image_size: int) -> int:
    """Images per checksum block at ``image_size`` px (about ``CHUNK_BYTES``)."""
    return max(1, CHUNK_BYTES // (3 * image_size * image_size))


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def write_image_array(target: Path, files: Sequence[Path], image_size: int, *, workers: int | None = None,
                      chunk_images: int | None = None) -> WrittenArray:
    """Decode ``files`` into the ``.npy`` array ``target`` ``[N, 3, S, S]`` (S = ``image_size``).

    Blocks of ``chunk_images`` images are decoded by ``workers`` threads (PIL releases the GIL while
    it decodes and resizes) and written at their offsets with ``os.pwrite``; plain writes, not a
    writable memory map, so a full disk is an ``OSError`` rather than a SIGBUS. Every file is decoded
    even after a failure, so one ``ImageDecodeError`` lists all the bad files. The array appears
    under ``target`` only when complete; on any failure nothing is left behind.
    """
    target = Path(target)
    chunk = chunk_images or chunk_images_for(image_size)
    shape = (len(files), 3, image_size, image_size)
    row_bytes = 3 * image_size * image_size
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    _require_space(target.parent, len(files) * row_bytes)
    try:
        with open(tmp, "wb") as handle:
            np.lib.format.write_array_header_1_0(
                handle, {"descr": "|u1", "fortran_order": False, "shape": shape})
            offset = handle.tell()
            handle.truncate(offset + len(files) * row_bytes)
            starts = range(0, len(files), chunk)

            def work(start: int) -> tuple[list[SourceRecord | str], str]:
                return _decode_chunk(handle.fileno(), offset + start * row_bytes,
                                     files[start:start + chunk], image_size)

            with ThreadPoolExecutor(max_workers=workers or default_workers()) as pool:
                results = list(pool.map(work, starts))
            handle.flush()
            os.fsync(handle.fileno())
        records = [r for rows, _ in results for r in rows]
        failures = [r for r in records if isinstance(r, str)]
        if failures:
            raise _decode_error(failures)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return WrittenArray(records=records, chunk_images=chunk, chunk_md5=[md5 for _, md5 in results],
                        shape=shape)


def _decode_chunk(fd: int, position: int, files: Sequence[Path],
                  image_size: int) -> tuple[list[SourceRecord | str], str]:
    """Decode one block into channels-first pixels, write it at ``position``; (records, block md5).

    A file that fails gives its error line instead of a record (its pixels stay zero; the array is
    discarded anyway)."""
    block = np.zeros((len(files), image_size, image_size, 3), dtype=np.uint8)
    records: list[SourceRecord | str] = []
    for row, path in enumerate(files):
        try:
            data = Path(path).read_bytes()
            block[row] = decode_image_bytes(data, image_size)
            records.append(SourceRecord(size=len(data), md5=hashlib.md5(data).hexdigest()))
        except (OSError, ValueError, SyntaxError) as error:  # PIL: OSError/UnidentifiedImageError
            records.append(f"{path}: {error}")
    pixels = np.ascontiguousarray(block.transpose(0, 3, 1, 2))
    view = memoryview(pixels).cast("B")
    written = 0
    while written < len(view):  # pwrite may write fewer bytes than asked
        written += os.pwrite(fd, view[written:], position + written)
    return records, hashlib.md5(view).hexdigest()


def _decode_error(failures: list[str]) -> ImageDecodeError:
    listed = "\n  ".join(failures[:MAX_LISTED_ERRORS])
    more = f"\n  ... and {len(failures) - MAX_LISTED_ERRORS} more" if len(failures) > MAX_LISTED_ERRORS else ""
    return ImageDecodeError(
        f"{len(failures)} image file(s) cannot be decoded (corrupt or truncated):\n  {listed}{more}\n"
        "Replace each with an intact copy from the original dataset (or delete it), then run the prepare "
        "stage again; nothing was written.")


def _require_space(folder: Path, needed: int) -> None:
    """Fail before decoding when the array cannot fit (a full disk mid-way wastes the whole pass)."""
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise DatasetError(f"the prepared array needs {needed / 2**30:.2f} GiB but {folder} has "
                           f"{free / 2**30:.2f} GiB free; free space or move data/prepared to a larger disk")


def verify_prepared(prepared_dir: Path, splits: Sequence[str] | None = None,
                    workers: int | None = None) -> list[tuple[str, int, int]]:
    """Check every block of the prepared arrays in ``prepared_dir`` against meta.json's md5s.

    Returns ``(split, blocks, bytes)`` per split checked; a mismatch, a truncated array or a changed
    index is an ``ArtifactError`` naming the file, a dataset without block checksums (CIFAR, digits:
    ``.npz`` files that DVC's md5 covers) a ``DatasetError`` saying so.
    """
    from dssl.data.datasets import load_split  # datasets imports this module

    meta = read_json(Path(prepared_dir) / "meta.json", {"format": str, "splits": list})
    if meta["format"] != "memmap":
        raise DatasetError(f"{prepared_dir} holds {meta['format']!r} arrays, not a decoded image folder: "
                           "they have no block checksums (DVC's md5 in dvc.lock covers them: `dvc status`)")
    checked = []
    for split in splits or meta["splits"]:
        images = load_split(Path(prepared_dir), split)
        if not isinstance(images, MemmapImageSet):
            raise DatasetError(f"{prepared_dir}: split {split!r} is not a memory-mapped array")
        images.verify(workers)
        checked.append((split, len(images.chunk_md5), images.path.stat().st_size))
    return checked


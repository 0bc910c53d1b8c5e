"""Batches of an image set read in the training process: prefetch threads, float conversion in reused buffers.

The prepared arrays (``dssl.data.prepared_array``) make a batch one gather from a memory-mapped uint8
file, so what remains of the data path's cost is turning that batch into float. A float32 batch of
64 x 3 x 224 x 224 is 37 MiB, above glibc's largest mmap threshold (32 MiB): every fresh allocation
is fresh pages from the kernel, and faulting in and zeroing them costs several times the conversion
(on one core: ``x.float().div_(255)`` of such a batch takes 26 ms, the same into a reused array
4 ms). Hence:

- ``BufferPool``: outputs are written into arrays kept by the pool and handed out as tensors over
  them; an array is reused only once nothing refers to it any more (no tensor, view or autograd
  graph), so a caller that keeps a batch keeps valid data and merely gets a fresh array next time.
- ``Normalisation``: uint8 -> float ``(x / 255 - mean) / std``: one converting copy, then one fused
  multiply-add pass per channel, in place; ``UNIT_RANGE`` (mean 0, std 1) is exactly
  ``x.float().div_(255)``, bit for bit.
- ``read_batches``: a batch is read and converted by one of ``workers`` threads while the caller
  uses the previous one (numpy's gather and torch's kernels release the GIL). Threads share the map
  and the buffers, so nothing is pickled or copied through shared memory as with DataLoader worker
  processes, and the order of the batches is exactly the order asked for.
- ``DeviceBatches``: batches as [0, 1] floats on the training device, resized there. For an
  accelerator a reader thread gathers the uint8 pixels into pinned host buffers while the step runs,
  each copied to the device without waiting (``non_blocking``); a buffer is refilled only once its
  copy has finished (a CUDA event, not a device-wide sync). uint8 travels (a quarter of float's
  bytes) and the resize to the model's size (``device_float``) happens on the device: CIFAR's 32 px
  images are never made 224 px on the host.
- ``ResidentBatches``: a set small enough (CIFAR: 150 MiB) moved to the accelerator once, as uint8, for a
  whole fine-tuning; a batch is then a gather there (``index_select``), with only its indices to move.
"""

from __future__ import annotations

import inspect
import math
import queue
import sys
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator, Protocol, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch


class BatchSource(Protocol):
    """What batch reading needs from an ``ImageSet`` (whose ``get_batch`` also fills a given buffer)."""

    labels: np.ndarray

    def __len__(self) -> int: ...

    def get_batch(self, indices: np.ndarray) -> torch.Tensor: ...

    @property
    def image_shape(self) -> tuple[int, int, int]: ...


# Float batches up to this size are allocated afresh, not from the pool: glibc recycles freed blocks
# below its largest mmap threshold (32 MiB) itself, and there the pool's bookkeeping and the gather
# into its buffer cost more than they save (measured at 224 px, batch 32: 18.4 MiB).
SMALL_BATCH_BYTES = 32 * 2**20
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class Normalisation:
    """Per-channel ``(x / 255 - mean) / std`` of uint8 pixels (torchvision's ``ToTensor`` + ``Normalize``).

    Computed as ``x * (1 / (255 std)) - mean / std`` in float32: equal to the two-step reference up to
    float rounding (a few 1e-7). With mean 0 and std 1 it is ``x / 255`` exactly as the training loop
    has always computed it (``x.float().div_(255)``), so results do not change by a bit.
    """

    mean: tuple[float, ...] = (0.0,)  # one value: the same for every channel
    std: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        if len(self.mean) != len(self.std) or any(s <= 0 for s in self.std):
            raise ValueError(f"normalisation needs one mean and one positive std per channel, got "
                             f"mean {self.mean}, std {self.std}")

    @property
    def unit_range(self) -> bool:
        return all(m == 0 for m in self.mean) and all(s == 1 for s in self.std)

    def apply(self, pixels: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """The normalised float version of uint8 ``pixels`` ``[B, C, H, W]``, written into ``out`` when
        given (else a new tensor)."""
        import torch

        channels = pixels.shape[1] if pixels.ndim == 4 else -1
        if (out is not None and pixels.shape != out.shape) or len(self.mean) not in (1, channels):
            got = f" and output {list(out.shape)}" if out is not None else ""
            raise ValueError(f"pixels {list(pixels.shape)}{got} must be [B, C, H, W] with C = {len(self.mean)} "
                             "channels (and the output of the same shape)")
        out = pixels.float() if out is None else out.copy_(pixels)
        if self.unit_range:
            return out.div_(255.0)
        mean, std = (self.mean * channels, self.std * channels) if len(self.mean) == 1 else (self.mean, self.std)
        for plane_index, (m, s) in enumerate(zip(mean, std)):
            plane = out[:, plane_index]
            torch.add(torch.tensor(-m / s, dtype=out.dtype), plane, alpha=1.0 / (255.0 * s), out=plane)  # one pass
        return out


UNIT_RANGE = Normalisation()


class BufferPool:
    """At most ``size`` output arrays, each reused once nothing refers to it any more.

    "Nothing refers to it" is the array's reference count back at its value when the pool created
    it: a tensor made with ``torch.from_numpy`` over the array (or over a view of it) holds a reference
    until its storage, shared by all its views and by autograd's saved tensors, is freed. Beyond
    ``size`` arrays in use, fresh arrays are allocated and not kept. Not thread-safe: call ``take``
    from one thread (``read_batches`` does, before handing the array to a worker thread).
    """

    def __init__(self, size: int):
        self.size = int(size)
        self._arrays: list[np.ndarray] = []
        self._free_refs: list[int] = []

    def _refs(self, slot: int) -> int:
        return sys.getrefcount(self._arrays[slot])

    def take(self, shape: Sequence[int], dtype: np.dtype | type) -> np.ndarray:
        """An array of ``shape`` and ``dtype``, its content undefined."""
        shape, dtype = tuple(shape), np.dtype(dtype)
        for slot in range(len(self._arrays)):  # by position: a loop variable would be a reference
            if self._refs(slot) <= self._free_refs[slot]:
                array = self._arrays[slot]
                if array.dtype == dtype and array.shape[1:] == shape[1:] and len(array) >= shape[0]:
                    return array[:shape[0]]
        array = np.empty(shape, dtype)
        if len(self._arrays) < self.size:
            self._arrays.append(array)
            self._free_refs.append(self._refs(len(self._arrays) - 1) - 1)  # minus `array` above
        return array


def read_batches(images: BatchSource, batches: Iterable[np.ndarray], *, normalisation: Normalisation | None = None,
                 workers: int = 1, pool: BufferPool | None = None) -> Iterator[torch.Tensor]:
    """The images at each index array of ``batches``, in that order: uint8 ``[B, C, H, W]`` tensors, or
    float32 normalised by ``normalisation``.

    ``workers`` threads read and convert up to ``workers`` batches ahead of the one being used
    (``workers=0``: each batch is read when asked for, in the calling thread). Output arrays of
    batches larger than ``SMALL_BATCH_BYTES`` (as float32) come from ``pool`` (default: one sized for the
    batches in flight plus the one the caller holds); keeping a yielded batch is safe, it only costs
    a fresh allocation later.
    """
    import torch

    if workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    pool = pool or BufferPool(pool_size(workers))
    image_shape = getattr(images, "image_shape", None)  # None: a source sized only by its batches
    fills_buffers = image_shape is not None and _fills_buffers(images)

    def read(indices: np.ndarray, pixels: np.ndarray | None, out: np.ndarray | None) -> torch.Tensor:
        batch = images.get_batch(indices, out=pixels) if pixels is not None else images.get_batch(indices)
        if normalisation is None:
            return batch
        return normalisation.apply(batch, torch.from_numpy(out) if out is not None else None)

    def submit(run, indices: np.ndarray):
        indices = np.asarray(indices, dtype=np.int64)
        shape = (len(indices), *image_shape) if image_shape is not None else None
        pooled = shape is not None and 4 * math.prod(shape) > SMALL_BATCH_BYTES
        # With a float output the uint8 gather is only scratch, free again once converted.
        pixels = pool.take(shape, np.uint8) if pooled and fills_buffers else None
        out = pool.take(shape, np.float32) if pooled and normalisation is not None else None
        return run(read, indices, pixels, out)

    if workers == 0:
        for indices in batches:
            yield submit(lambda fn, *args: fn(*args), indices)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="batches") as executor:
        pending: deque = deque()
        source = iter(batches)
        try:
            for indices in source:
                pending.append(submit(executor.submit, indices))
                if len(pending) > workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def _fills_buffers(images: BatchSource) -> bool:
    """Whether ``images.get_batch`` takes ``out`` (every ``ImageSet`` does, unless a subclass overrides it)."""
    try:
        return "out" in inspect.signature(images.get_batch).parameters
    except (TypeError, ValueError):
        return False


def pool_size(workers: int) -> int:
    """Buffers ``read_batches`` needs to reuse: for each of the ``workers`` batches in flight, the one
    being submitted and the one the caller holds, a uint8 gather and a float output."""
    return 2 * (workers + 2)


def epoch_batches(indices: np.ndarray, batch_size: int, generator: torch.Generator,
                  drop_last: bool = False) -> list[np.ndarray]:
    """One epoch of shuffled batches of ``indices``: a fresh ``torch.randperm`` permutation from
    ``generator`` cut into ``batch_size`` runs, the last one partial unless ``drop_last``. The local
    training loop draws its epochs the same way; a DataLoader with ``shuffle=True`` draws from the
    same distribution (a uniform permutation per epoch), though not the same stream."""
    import torch

    order = np.asarray(indices)[torch.randperm(len(indices), generator=generator).numpy()]
    stop = len(order) - len(order) % batch_size if drop_last else len(order)
    return [order[start:start + batch_size] for start in range(0, stop, batch_size)]


class ShuffledBatches:
    """Epochs of shuffled ``(images, labels)`` batches of an image set, read by ``read_batches``.

    Iterating once is one epoch with a new permutation (``epoch_batches``), like a ``DataLoader`` with
    ``shuffle=True`` and ``batch_size``; the threads live for one epoch. ``reuse_buffers=False``
    allocates every output afresh (for measuring what the reuse saves).
    """

    def __init__(self, images: BatchSource, batch_size: int, generator: torch.Generator, *,
                 indices: np.ndarray | None = None, normalisation: Normalisation | None = None,
                 workers: int = 1, drop_last: bool = False, reuse_buffers: bool = True):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.images, self.batch_size, self.generator = images, int(batch_size), generator
        self.indices = np.arange(len(images)) if indices is None else np.asarray(indices, dtype=np.int64)
        self.normalisation, self.workers, self.drop_last = normalisation, int(workers), drop_last
        self.pool = BufferPool(pool_size(self.workers) if reuse_buffers else 0)

    def __len__(self) -> int:
        full, rest = divmod(len(self.indices), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        import torch

        batches = epoch_batches(self.indices, self.batch_size, self.generator, self.drop_last)
        pixels = read_batches(self.images, batches, normalisation=self.normalisation, workers=self.workers,
                              pool=self.pool)
        for indices, batch in zip(batches, pixels):
            yield batch, torch.from_numpy(self.images.labels[indices])


# Batches a reader thread gathers ahead of the step on an accelerator (each in its own pinned buffer).
DEVICE_READ_AHEAD = 2


def stored_form(images: BatchSource) -> tuple[BatchSource, int | None]:
    """The set that holds the pixels and the size its batches are resized to: a resized view
    (``dssl.data.imageset.ResizedImageSet``, which has ``base`` and ``size``) is read at its base's
    size and resized where the batch is used; any other set as it is (size None: no resize)."""
    base, size = getattr(images, "base", None), getattr(images, "size", None)
    if base is not None and isinstance(size, int):
        return base, size
    return images, None


def device_float(pixels: torch.Tensor, device, size: int | None = None) -> torch.Tensor:
    """uint8 ``[B, C, H, W]`` pixels as [0, 1] floats on ``device``, at ``size`` x ``size`` px when given.

    The resize is ``ResizedImageSet``'s (bilinear, rounded to whole pixel values, clamped to [0, 255]),
    done after the move: on the CPU the result is the host path's bit for bit (a float holds every
    uint8 value exactly, so the uint8 round trip is skipped without changing a bit).
    """
    import torch.nn.functional as F

    batch = pixels.to(device, non_blocking=True).float()
    if size is not None and tuple(batch.shape[-2:]) != (size, size):
        batch = F.interpolate(batch, size=(size, size), mode="bilinear", align_corners=False).round_().clamp_(0, 255)
    return batch.div_(255.0)


class DeviceBatches:
    """The images at each index array of a list, as [0, 1] float tensors on ``device`` (``__call__``).

    ``size``: resize each batch to ``size`` px on the device (default: the size ``images`` presents;
    a ``ResizedImageSet`` is read at its base's size, see ``stored_form``); ``resize=False``: batches at
    the stored size (a random-resized crop that follows does the resize). ``reader_thread``: gather the
    batches in a background thread, ``DEVICE_READ_AHEAD`` ahead of the step, into pinned buffers on an
    accelerator (default: on an accelerator only; on the CPU the thread would compete with the step
    for the same cores).
    """

    def __init__(self, images: BatchSource, device, size: int | None = None, resize: bool = True,
                 reader_thread: bool | None = None):
        self.source, stored_size = stored_form(images)
        self.size = (size if size is not None else stored_size) if resize else None
        self.device = device
        on_cpu = getattr(device, "type", str(device)) == "cpu"
        self.reader_thread = not on_cpu if reader_thread is None else reader_thread
        self.pinned = not on_cpu

    def _pixels(self, indices: np.ndarray) -> torch.Tensor:
        return self.source.get_batch(np.asarray(indices, dtype=np.int64))

    def __call__(self, batches: Sequence[np.ndarray]) -> Iterator[torch.Tensor]:
        if not self.reader_thread:
            for indices in batches:
                yield device_float(self._pixels(indices), self.device, self.size)
            return
        yield from self._read_ahead(batches)

    def _read_ahead(self, batches: Sequence[np.ndarray]) -> Iterator[torch.Tensor]:
        """A reader thread fills free buffers and queues them; a buffer goes back to the free queue only
        after its copy to the device was issued and an event marks its end, and the reader waits for
        that event before filling it again."""
        free: queue.Queue = queue.Queue()
        for _ in range(DEVICE_READ_AHEAD + 1):
            free.put(_PinnedSlot(self.pinned))
        ready: queue.Queue = queue.Queue()
        stop = threading.Event()
        # Gathered straight into the buffer when the source fills a given one.
        direct = hasattr(self.source, "image_shape") and _fills_buffers(self.source)

        def take() -> _PinnedSlot | None:
            while not stop.is_set():
                try:
                    return free.get(timeout=0.1)
                except queue.Empty:
                    continue
            return None

        def read() -> None:
            try:
                for indices in batches:
                    slot = take()
                    if slot is None:
                        return
                    slot.wait_copied()
                    if direct:
                        pixels = slot.take((len(indices), *self.source.image_shape))
                        self.source.get_batch(np.asarray(indices, dtype=np.int64), out=pixels.numpy())
                    else:
                        pixels = self._pixels(indices)
                        pixels = slot.take(tuple(pixels.shape)).copy_(pixels)
                    ready.put((slot, pixels))
                ready.put(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
                ready.put(exc)

        reader = threading.Thread(target=read, name="device-batches", daemon=True)
        reader.start()
        try:
            while (item := ready.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                slot, pixels = item
                batch = device_float(pixels, self.device, self.size)
                slot.mark_copied()
                free.put(slot)
                yield batch
        finally:
            stop.set()
            reader.join()


# A set is kept on an accelerator for a fine-tuning when its uint8 array is at most this big and at most
# this share of the device's free memory (CIFAR-100's training split: 150 MiB; ImageNet's: 187 GiB).
RESIDENT_MAX_BYTES = 4 * 2**30
RESIDENT_MAX_FREE_SHARE = 0.25


class ResidentBatches:
    """The images at each index array of a list, as [0, 1] float tensors on ``device``, gathered from the
    set's whole uint8 array, moved there once (``DeviceBatches``' interface and values).

    Per batch nothing is read or copied on the host: the batches' indices travel in one copy per call,
    and each batch is an ``index_select`` on the device, resized there as ``DeviceBatches`` resizes
    (``size``, ``resize``). ``fits`` says whether a set is small enough to keep on a device.
    """

    def __init__(self, images: BatchSource, device, size: int | None = None, resize: bool = True):
        import torch

        source, stored_size = stored_form(images)
        self.size = (size if size is not None else stored_size) if resize else None
        self.device = torch.device(device)
        self.pixels = source.get_batch(np.arange(len(source), dtype=np.int64)).to(self.device)

    @staticmethod
    def fits(images: BatchSource, device) -> bool:
        """Whether ``images``' stored array may live on ``device`` (an accelerator with room for it: at most
        ``RESIDENT_MAX_BYTES`` and ``RESIDENT_MAX_FREE_SHARE`` of its free memory); never on the CPU,
        where the set is in host memory already."""
        import torch

        device = torch.device(device)
        source, _ = stored_form(images)
        if device.type == "cpu" or not hasattr(source, "image_shape"):
            return False
        size = len(source) * math.prod(source.image_shape)
        free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else size / RESIDENT_MAX_FREE_SHARE
        return size <= min(RESIDENT_MAX_BYTES, RESIDENT_MAX_FREE_SHARE * free)

    def __call__(self, batches: Sequence[np.ndarray]) -> Iterator[torch.Tensor]:
        import torch

        if not len(batches):
            return
        flat = torch.from_numpy(np.concatenate([np.asarray(b, dtype=np.int64) for b in batches]))
        if self.device.type == "cuda":
            flat = flat.pin_memory()
        flat = flat.to(self.device, non_blocking=True)
        for indices in flat.split([len(b) for b in batches]):
            yield device_float(self.pixels.index_select(0, indices), self.device, self.size)


class _PinnedSlot:
    """One host buffer of uint8 pixels (pinned for an accelerator) and the event that marks the end of
    its last copy to the device."""

    def __init__(self, pinned: bool) -> None:
        self.pinned = pinned
        self.buffer = None
        self.copied = None

    def wait_copied(self) -> None:
        if self.copied is not None:
            self.copied.synchronize()   # this buffer's copy only, not the device's whole queue

    def mark_copied(self) -> None:
        """After the copy from this buffer was issued on the current stream (on the CPU it is done)."""
        if self.pinned:
            import torch

            self.copied = torch.cuda.Event()
            self.copied.record()

    def take(self, shape: tuple[int, ...]) -> torch.Tensor:
        """A uint8 tensor of ``shape`` over this slot's buffer (grown when too small)."""
        import torch

        if self.buffer is None or tuple(self.buffer.shape[1:]) != tuple(shape[1:]) or len(self.buffer) < shape[0]:
            self.buffer = torch.empty(shape, dtype=torch.uint8, pin_memory=self.pinned)
        return self.buffer[:shape[0]]

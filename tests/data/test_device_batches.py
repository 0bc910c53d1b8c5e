"""Batches on the training device: read at the stored size and resized where they are used, with the
bits of the host-side resize on a CPU; a set kept on the device gives the same batches."""

from __future__ import annotations

import numpy as np
import torch

from dssl.data.batches import DeviceBatches, ResidentBatches, device_float, stored_form
from dssl.data.imageset import ArrayImageSet, resized


def _images(size: int = 8, count: int = 20) -> ArrayImageSet:
    rng = np.random.default_rng(0)
    return ArrayImageSet(rng.integers(0, 256, (count, size, size, 3), dtype=np.uint8), np.arange(count) % 3, 3)


def test_a_resized_set_is_read_at_its_stored_size_and_resized_on_the_device_with_the_host_bits():
    base = _images()
    view = resized(base, 14)
    assert stored_form(view) == (base, 14) and stored_form(base) == (base, None)
    batches = [np.array([3, 1, 7]), np.array([0, 19])]
    on_device = list(DeviceBatches(view, torch.device("cpu"))(batches))
    host = [view.get_batch(b).float().div_(255.0) for b in batches]   # the host path: resize, then to float
    assert all(torch.equal(a, b) for a, b in zip(on_device, host))
    assert on_device[0].shape == (3, 3, 14, 14) and on_device[0].dtype == torch.float32


def test_batches_at_the_stored_size_when_a_crop_resizes_later():
    view = resized(_images(), 14)
    batch = next(iter(DeviceBatches(view, torch.device("cpu"), resize=False)([np.arange(4)])))
    assert batch.shape == (4, 3, 8, 8)
    assert torch.equal(device_float(_images().get_batch(np.arange(4)), "cpu"), batch)


class _SlowImages:
    """A source without buffer filling (each batch a fresh read), slow by its first index, or broken."""

    def __init__(self, base, broken: bool = False):
        self.base, self.broken, self.labels = base, broken, base.labels

    def __len__(self) -> int:
        return len(self.base)

    def get_batch(self, indices):
        import time

        if self.broken:
            raise RuntimeError(f"cannot read batch at {indices[0]}")
        time.sleep(0.002 * (int(indices[0]) % 3))
        return self.base.get_batch(indices)


def test_a_set_kept_on_the_device_gives_the_batches_of_the_reader():
    base = _images()
    batches = [np.array([3, 1, 7]), np.array([0, 19, 4, 4])]
    for images, resize in ((resized(base, 14), True), (resized(base, 14), False), (base, True)):
        kept = list(ResidentBatches(images, torch.device("cpu"), resize=resize)(batches))
        read = list(DeviceBatches(images, torch.device("cpu"), resize=resize)(batches))
        assert all(torch.equal(a, b) for a, b in zip(kept, read)) and len(kept) == 2
    assert not ResidentBatches.fits(base, torch.device("cpu"))   # on the CPU the set is in memory already


def test_the_reader_thread_yields_the_batches_in_order_and_stops_cleanly():
    import threading

    base = _images(count=40)
    batches = [np.arange(i, i + 5) for i in range(0, 40, 5)]

    slow = _SlowImages(base)
    plain = list(DeviceBatches(slow, torch.device("cpu"))(batches))
    ahead = list(DeviceBatches(slow, torch.device("cpu"), reader_thread=True)(batches))
    direct = list(DeviceBatches(base, torch.device("cpu"), reader_thread=True)(batches))
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(plain, ahead, direct))
    assert len(ahead) == len(batches)
    reader = DeviceBatches(base, torch.device("cpu"), reader_thread=True)(batches)
    next(reader)
    reader.close()   # a consumer that stops early (an exception in the step) leaves no thread behind
    assert not [t for t in threading.enumerate() if t.name == "device-batches"]


def test_an_error_in_the_reader_thread_reaches_the_consumer():
    import pytest

    with pytest.raises(RuntimeError, match="cannot read batch at 0"):
        reader = DeviceBatches(_SlowImages(_images(), broken=True), torch.device("cpu"), reader_thread=True)
        list(reader([np.arange(3)]))

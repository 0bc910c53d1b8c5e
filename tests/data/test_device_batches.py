"""Batches on the training device: read at the stored size and resized where they are used, with the
bits of the host-side resize on a CPU; a host transform sees each batch with its number."""

from __future__ import annotations

import numpy as np
import torch

from dssl.data.batches import DeviceBatches, device_float, stored_form
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


def test_a_host_transform_gets_each_batch_with_its_number():
    seen = []

    def transform(pixels, number):
        seen.append((len(pixels), number))
        return 255 - pixels

    base = _images()
    batches = [np.arange(5), np.arange(5, 8)]
    out = list(DeviceBatches(base, torch.device("cpu"), host_transform=transform)(batches, first_number=3))
    assert seen == [(5, 3), (3, 4)]
    assert torch.equal(out[1], (255 - base.get_batch(batches[1])).float() / 255)


def test_the_reader_thread_yields_the_batches_in_order_and_stops_cleanly():
    import threading
    import time

    base = _images(count=40)
    batches = [np.arange(i, i + 5) for i in range(0, 40, 5)]

    def slow(pixels, number):
        time.sleep(0.01 * (number % 3))
        return pixels

    plain = list(DeviceBatches(base, torch.device("cpu"), host_transform=slow)(batches))
    ahead = list(DeviceBatches(base, torch.device("cpu"), host_transform=slow, reader_thread=True)(batches))
    direct = list(DeviceBatches(base, torch.device("cpu"), reader_thread=True)(batches))
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(plain, ahead, direct))
    assert len(ahead) == len(batches)
    reader = DeviceBatches(base, torch.device("cpu"), reader_thread=True)(batches)
    next(reader)
    reader.close()   # a consumer that stops early (an exception in the step) leaves no thread behind
    assert not [t for t in threading.enumerate() if t.name == "device-batches"]


def test_an_error_in_the_reader_thread_reaches_the_consumer():
    import pytest

    def broken(pixels, number):
        raise RuntimeError(f"cannot read batch {number}")

    with pytest.raises(RuntimeError, match="cannot read batch 0"):
        list(DeviceBatches(_images(), torch.device("cpu"), host_transform=broken, reader_thread=True)([np.arange(3)]))

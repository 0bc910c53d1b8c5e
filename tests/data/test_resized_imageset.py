"""ResizedImageSet: a dataset seen at the model's input size, labels untouched."""

from __future__ import annotations

import numpy as np

from dssl.data.imageset import ArrayImageSet, resized


def test_resize_doubles_a_constant_image_exactly() -> None:
    images = np.full((3, 8, 8, 1), 200, dtype=np.uint8)
    base = ArrayImageSet(images, np.array([0, 1, 2]), 3)
    view = resized(base, 16)
    batch = view.get_batch([2, 0])
    assert tuple(batch.shape) == (2, 1, 16, 16)
    assert batch.dtype.is_floating_point is False and int(batch.min()) == int(batch.max()) == 200
    assert view.image_shape == (1, 16, 16)
    np.testing.assert_array_equal(view.labels, [0, 1, 2])


def test_same_size_is_the_set_itself() -> None:
    base = ArrayImageSet(np.zeros((2, 16, 16, 3), dtype=np.uint8), np.array([0, 1]), 2)
    assert resized(base, 16) is base

"""The ranges several methods' options share (standard library only)."""

from __future__ import annotations

from dssl.config.ranges import Range

WIDTH = Range(1, 65_536)                                   # a head's or decoder's width
MASK_RATIO = Range(0.0, 1.0, low_open=True, high_open=True)  # some patches masked, some visible
CROP_MIN_SCALE = Range(0.0, 1.0, low_open=True)            # the smallest random-resized-crop area fraction
PROBABILITY = Range(0.0, 1.0)
MOMENTUM = Range(0.0, 1.0)                                 # an EMA's: 1 freezes the target
POSITIVE = Range(0.0, low_open=True)                       # a temperature

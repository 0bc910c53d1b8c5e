"""Fixtures for the linear-theory tests."""

from __future__ import annotations

import pytest

from dssl.theory.data_model import SampleSizes, generate_dataset


@pytest.fixture
def tiny_dataset():
    """N=2 clients, d=16: small enough for gradient descent, big enough for a clear eigen-gap."""
    return generate_dataset(16, 2, seed=0, sizes=SampleSizes(n_frequent=24, n_rare=4))


"""dssl: distributed self-supervised learning under non-IID data, as a reproducible pipeline."""

__version__ = "0.1.0"

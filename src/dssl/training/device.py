"""The device a stage trains on: params' ``device`` (``auto | cpu | cuda``) made a torch device.

``auto`` is the first GPU when torch sees one, else the CPU (``DSSL_DEVICE``, e.g. ``cuda:1``, names
another). ``cuda`` means a GPU or nothing: a stage asked for one that finds none stops with
``DeviceError`` before it loads data or builds a model, instead of running for days on the CPU.
``DSSL_DEVICE`` may pick which GPU (``cuda:1``) but never turns a ``cuda`` request into the CPU.
"""

from __future__ import annotations

import os

from dssl.training.options import DEVICES

DEVICE_ENV = "DSSL_DEVICE"


class DeviceError(RuntimeError):
    """The device a params file asks for is not there (the message names the key and the fixes)."""


def resolve_device(requested: str = "auto", where: str = "device"):
    """The torch device for ``requested`` (one of ``DEVICES``); ``where`` names the params key in errors."""
    import torch

    if requested not in DEVICES:
        raise DeviceError(f"{where}: unknown device {requested!r}; one of: {', '.join(DEVICES)}")
    override = os.environ.get(DEVICE_ENV)
    if requested == "auto":
        return torch.device(override or ("cuda" if torch.cuda.is_available() else "cpu"))
    if requested == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise DeviceError(f"{where} is 'cuda' but torch finds no GPU ({_why_no_gpu(torch)}). Run the stage on a GPU "
                          "node (profiles/slurm requests one per training and evaluation job), or set "
                          f"{where}: auto (GPU when there is one, else CPU) or cpu in the params file.")
    if override and torch.device(override).type == "cuda":
        return torch.device(override)
    return torch.device("cuda")


def _why_no_gpu(torch) -> str:
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build"
    count = torch.cuda.device_count()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hint = f", CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
    return (f"torch {torch.__version__} built for CUDA {torch.version.cuda} sees {count} device(s){hint}; "
            "is the NVIDIA driver recent enough for that CUDA version?")

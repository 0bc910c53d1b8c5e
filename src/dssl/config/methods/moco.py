"""MoCo's hyper-parameters (``models.<model>.hparams`` of ``method: moco``), declared once.

References:
    [0] MoCo v1, 2019, https://arxiv.org/abs/1911.05722
    [1] MoCo v2, 2020, https://arxiv.org/abs/2003.04297
    [2] FedEMA / FedSSL, 2022, https://arxiv.org/abs/2204.04385
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from dssl.config.methods import MethodSpec
from dssl.config.methods._ranges import CROP_MIN_SCALE, MOMENTUM, POSITIVE, PROBABILITY, WIDTH
from dssl.config.ranges import Range
from dssl.specs import Options


@dataclass(frozen=True)
class MoCoConfig(Options):
    """MoCo v1 [0] and v2 [1] as paper B's [2] FedMoCo.

    MoCo's defaults (ResNet-50): key dimension 128, queue K = 65536, key-encoder momentum 0.999; ``version`` v1:
    a linear head and temperature 0.07, v2: a 2048-2048-128 MLP head and temperature 0.2. Paper B's for
    ResNet-18: queue 4096, dim 128, momentum 0.99 (this code's default), v1 head 512-128, v2 head 512-512-128.
    ``None`` sizes derive from the feature dimension d: head d-(d-)d/4, queue 32 x d/4; ``temperature`` ``None``
    takes the version's.

    The defaults are MoCo's own definition; paper B's released code departs in five ways, each an option:
    ``symmetric`` (both view orders, both batches of keys enqueued), ``head_bn`` (v2's MLP head with BN),
    ``jitter_strength`` (the colour-jitter strength s; the code's v1 uses 0.5), ``reset_key_encoder`` (the key
    networks copied from the query ones every round a client trains) and ``reset_queue`` (the queue restarted
    every round). ``flip_p``: the views' flip probability.
    """

    proj_hidden_dim: Annotated[int | None, WIDTH] = None
    proj_output_dim: Annotated[int | None, WIDTH] = None
    queue_size: Annotated[int | None, Range(1, 1_048_576)] = None
    momentum: Annotated[float, MOMENTUM] = 0.99
    temperature: Annotated[float | None, POSITIVE] = None
    crop_min_scale: Annotated[float, CROP_MIN_SCALE] = 0.08
    version: Literal["v1", "v2"] = "v2"
    flip_p: Annotated[float, PROBABILITY] = 0.5
    symmetric: bool = False
    head_bn: bool = False
    jitter_strength: Annotated[float, Range(0.0)] = 1.0
    reset_key_encoder: bool = False
    reset_queue: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.head_bn and self.version != "v2":
            raise ValueError("MoCoConfig: head_bn adds BN to MoCo v2's MLP head; v1's head is one Linear layer")


SPEC = MethodSpec("moco", MoCoConfig, "methods.moco:MoCo")

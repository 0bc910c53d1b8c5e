"""Orchestra's hyper-parameters (``models.<model>.hparams`` of ``method: orchestra``), declared once.

References:
    [0] Orchestra, 2022, https://arxiv.org/abs/2205.11506
    [1] SwAV, 2020, https://arxiv.org/abs/2006.09882
    [2] BYOL, 2020, https://arxiv.org/abs/2006.07733
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from dssl.config.methods import MethodSpec
from dssl.config.methods._ranges import CROP_MIN_SCALE, MOMENTUM, POSITIVE, PROBABILITY, WIDTH
from dssl.config.ranges import Range
from dssl.specs import Options

CENTROIDS = Range(1, 100_000)


@dataclass(frozen=True)
class OrchestraConfig(Options):
    """Orchestra's [0] local model, trained by the ``orchestra`` FL strategy.

    The paper's code's defaults (ResNet-18, its ``config.py``), all this code's: projector 512-512-512
    (``None`` widths: the backbone's feature dimension d), ``num_global_centroids`` 128, ``num_local_centroids`` 16,
    ``memory_size`` 128, ``temperature`` 0.1, ``sinkhorn_temperature`` 1/25 = 0.04, EMA ``momentum`` 0.996
    (BYOL's [2] base momentum), ``rotation_weight`` 1 (the degeneracy regulariser), crop scale (0.5, 1).
    ``target_assignment``: ``softmax`` of the target's similarities to the global centroids (the released code)
    or ``sinkhorn`` (SwAV's [1] equal-size assignment). ``local_target``: false (the code's stateless clients:
    the EMA target travels with the model and is averaged), true keeps it on each client.
    """

    proj_hidden_dim: Annotated[int | None, WIDTH] = None
    proj_output_dim: Annotated[int | None, WIDTH] = None
    num_global_centroids: Annotated[int, CENTROIDS] = 128
    num_local_centroids: Annotated[int, CENTROIDS] = 16
    memory_size: Annotated[int, Range(1, 1_048_576)] = 128
    temperature: Annotated[float, POSITIVE] = 0.1
    sinkhorn_temperature: Annotated[float, POSITIVE] = 0.04
    momentum: Annotated[float, MOMENTUM] = 0.996
    rotation_weight: Annotated[float, Range(0.0)] = 1.0
    target_assignment: Literal["softmax", "sinkhorn"] = "softmax"
    local_target: bool = False
    crop_min_scale: Annotated[float, CROP_MIN_SCALE] = 0.5
    flip_p: Annotated[float, PROBABILITY] = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.num_local_centroids <= self.memory_size:
            raise ValueError(f"OrchestraConfig: need num_local_centroids <= memory_size (the memory is clustered), "
                             f"got {self.num_local_centroids}, {self.memory_size}")


SPEC = MethodSpec("orchestra", OrchestraConfig, "methods.orchestra:Orchestra")

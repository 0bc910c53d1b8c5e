"""The options FedMAR and DecMAR share: paper A's MAR loss (its gamma schedule, alignment and the z sent).

References:
    [0] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ
    [1] Gretton et al., A Kernel Two-Sample Test, 2012, https://jmlr.org/papers/v13/gretton12a.html
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from dssl.config.ranges import Range
from dssl.config.strategies._base import StrategyConfig


@dataclass(frozen=True)
class MARConfig(StrategyConfig):
    """Paper A's [0] MAR loss: the method's loss plus gamma_t * A(z_i, z_bar) (Section 5, Eq. 5-7).

    gamma decays by Eq. 7 from ``gamma_max`` to ``gamma_min`` (paper A's defaults 0.1 and 1e-3, appendix A.4.2,
    the best; ``gamma_min <= gamma_max``) over ``horizon`` participations (null: a client's expected
    participations over the run, as the paper suggests). ``alignment``: an entry of the alignment registry
    (``config.alignments``): ``a_mmd`` (default, Eq. 6: the unbiased MMD^2 [1] with the mean-distance
    bandwidth), ``a_mmd_code`` (the released code's token layout, MAE on a ViT only), ``mmd`` with the fixed
    bandwidth ``sigma`` (1.0), ... ``z_summary``: which batch a client sends, ``last_batch`` (default: its last
    local batch's representations, as Eq. 6 treats z_i) or ``epoch_mean`` (the released code's mean over batches).
    """

    gamma_max: Annotated[float, Range(0.0)] = 0.1
    gamma_min: Annotated[float, Range(0.0)] = 1e-3
    horizon: Annotated[float | None, Range(0.0, low_open=True)] = None
    alignment: str = field(default="a_mmd", metadata={
        "registry": "alignment", "hint": "a name of the alignment registry (config.alignments)"})
    sigma: Annotated[float, Range(0.0, low_open=True)] = 1.0
    z_summary: Literal["last_batch", "epoch_mean"] = "last_batch"

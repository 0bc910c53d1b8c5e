"""Weighted kNN on frozen features (``evaluate.knn``), declared once.

References:
    [0] InstDisc, Wu et al., 2018, https://arxiv.org/abs/1805.01978
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ

The kNN classifier of [0] as used by paper A [1]: L2-normalised features, a query's k most cosine-similar training
samples vote with weight exp(sim / T). [0] uses k = 200 and T = 0.07; this code's defaults are DINO's 20-NN monitor,
k = 20 and T = 0.07 (``dssl.evaluation.configs.KnnConfig``). Nothing is trained.
"""

from __future__ import annotations

from dssl.config.protocols import ProtocolSpec
from dssl.evaluation.configs import KnnConfig

SPEC = ProtocolSpec("knn", KnnConfig, "evaluation.knn:evaluate")

"""Full fine-tuning (``evaluate.finetune``), declared once.

References:
    [0] MAE, 2021, https://arxiv.org/abs/2111.06377
    [1] FedMAR / DecMAR, 2026, https://openreview.net/forum?id=c3yt5VSZPQ

Paper A [1] reports fine-tuning (its Table 3): one base lr 1e-3 at batch 256 (lr = base * batch / 256), 5 warm-up
epochs, batch 256 on CIFAR and 1024 on ImageNet, 50 epochs on CIFAR-10 and 100 on CIFAR-100; its ViTs with MAE's
recipe [0] (appendix A.2: AdamW, weight decay 0.05, layer decay 0.75, cosine schedule, drop path 0.1, RandAugment
(9, 0.5), mixup 0.8, cutmix 1.0, label smoothing 0.1), its CNNs with SGD. This code's defaults are a small-scale
recipe (AdamW, lr in (1e-3, 3e-4), weight decay 0.05, 20 epochs, batch 64, a 2-pixel translation;
``dssl.evaluation.configs.FineTuneConfig``); ``configs/paper.yaml`` sets paper A's through ``per_family`` and
``per_dataset``.
"""

from __future__ import annotations

from dssl.config.protocols import ProtocolSpec
from dssl.evaluation.configs import FineTuneConfig

SPEC = ProtocolSpec("finetune", FineTuneConfig, "evaluation.finetune:evaluate")

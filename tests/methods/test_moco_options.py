"""MoCo's options for paper B's code: the symmetric loss, BN in the v2 head, the v1 colour jitter."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dssl.methods import create_method


def moco(**hparams):
    torch.manual_seed(0)
    return create_method("moco", "cnn_small", 8, 1, queue_size=16, proj_output_dim=4, **hparams)


class TwoViews(nn.Module):
    """View 1 is the batch, view 2 its mirror image: a fixed pair, so the loss can be recomputed by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, images, generator=None):
        self.calls += 1
        return images if self.calls % 2 else images.flip(-1)


@pytest.mark.parametrize("symmetric", [False, True])
def test_the_loss_by_hand_one_direction_or_both(symmetric):
    method = moco(symmetric=symmetric)
    method.transform = TwoViews()
    images = torch.rand(4, 1, 8, 8)
    queue = method.queue.clone()
    with torch.no_grad():
        x1, x2 = images, images.flip(-1)
        q1, q2 = (F.normalize(method.projector(method.encoder(x)), dim=-1) for x in (x1, x2))
        k1, k2 = (F.normalize(method.key_projector(method.key_encoder(x)), dim=-1) for x in (x1, x2))

        def info_nce(q, k):   # -log softmax of the positive among [positive, queue] at temperature 0.2
            logits = torch.cat([(q * k).sum(1, keepdim=True), q @ queue], dim=1) / 0.2
            return F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long))

        expected = info_nce(q1, k2) + (info_nce(q2, k1) if symmetric else 0.0)
        loss = method.training_loss(images)["loss"]
    torch.testing.assert_close(loss, expected)
    enqueued = torch.cat([k1, k2]) if symmetric else k2
    torch.testing.assert_close(method.queue[:, :len(enqueued)], enqueued.T)
    assert int(method.queue_ptr) == len(enqueued)


def test_head_bn_and_jitter_strength_are_the_codes_options():
    plain, code = moco(), moco(head_bn=True, jitter_strength=0.5)
    assert not any(isinstance(m, nn.BatchNorm1d) for m in plain.projector.modules())
    assert [type(m) for m in code.projector] == [nn.Linear, nn.BatchNorm1d, nn.ReLU, nn.Linear]
    assert code.projector[0].bias is not None   # EasyFL's MLP keeps the first Linear's bias
    assert plain.transform.jitter == (0.8, 0.8, 0.8, 0.2)
    assert code.transform.jitter == pytest.approx((0.4, 0.4, 0.4, 0.1))   # the code's v1 MoCo transform
    with pytest.raises(ValueError, match="v1's head is one Linear"):
        moco(version="v1", head_bn=True)
    assert moco(reset_key_encoder=True).round_memory_keys() == moco().part_keys("target")
    assert moco(reset_queue=True).round_memory_keys() == ["queue", "queue_ptr"]
    assert moco().round_memory_keys() == []

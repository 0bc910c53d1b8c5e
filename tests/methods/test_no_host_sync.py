"""The per-step code reads nothing back to the host: no ``linalg_inv`` per colour-jitter call, no
``.item()`` / ``float()`` (aten ``_local_scalar_dense``) in A-MMD or Sinkhorn's accelerator path, no
``nonzero`` in feature skew's accelerator path, one fused lerp for the EMA. Every op the code dispatches
is recorded by a ``TorchDispatchMode``; each new path gives the old path's result (bits, on the CPU)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dssl.data.augment import ClientAugmentation
from dssl.federation import alignment
from dssl.federation.alignments import mmd as mmd_terms
from dssl.data import views as augment
from dssl.methods.base import ema_update
from dssl.methods.sinkhorn import sinkhorn_knopp

HOST_READS = {"_local_scalar_dense", "nonzero", "linalg_inv_ex", "item"}


class OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def _count(fn, *args, **kwargs):
    with OpCounter() as counter:
        out = fn(*args, **kwargs)
    return out, counter.ops


def test_colour_jitter_inverts_no_matrix_and_keeps_its_bits():
    images = torch.rand(8, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    jittered, ops = _count(augment.color_jitter, images, 0.4, 0.4, 0.4, 0.1, 1.0, torch.Generator().manual_seed(1))
    assert not HOST_READS & set(ops)
    # the old per-call formula
    angle = torch.full((8,), 0.3)
    to_yiq = augment._RGB_TO_YIQ
    rot = torch.zeros(8, 3, 3)
    rot[:, 0, 0] = 1
    rot[:, 1, 1], rot[:, 1, 2], rot[:, 2, 1], rot[:, 2, 2] = angle.cos(), -angle.sin(), angle.sin(), angle.cos()
    old = torch.einsum("bij,bjhw->bihw", torch.linalg.inv(to_yiq) @ rot @ to_yiq, images)
    assert torch.equal(augment._rotate_hue(images, angle), old)


@pytest.mark.parametrize("name", ["a_mmd", "a_mmd_median", "a_mmd_code"])
def test_a_mmd_keeps_its_bandwidth_on_the_device_and_its_bits(name):
    generator = torch.Generator().manual_seed(0)
    shape = (6, 5, 4) if name == "a_mmd_code" else (6, 4)
    z, z_bar = torch.randn(shape, generator=generator), torch.randn(shape, generator=generator)
    loss, ops = _count(alignment.alignment_loss, name, z, z_bar)
    assert not HOST_READS & set(ops)
    if name == "a_mmd":   # the old float bandwidth gives the same bits
        sigma = float(mmd_terms.bandwidth(z))
        assert isinstance(mmd_terms.bandwidth(z), torch.Tensor)
        assert torch.equal(loss, mmd_terms.mmd(z, z_bar, max(sigma, alignment.BANDWIDTH_FLOOR)))


def test_feature_skew_on_an_accelerator_path_needs_no_nonzero_and_matches_the_cpu_path():
    skew = ClientAugmentation({"brightness": 0.3, "brightness_p": 0.8, "blur_kernel": 5, "blur_sigma": [0.1, 2.0],
                               "blur_p": 0.5, "flip_p": 0.5})
    images = torch.rand(16, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    draws = skew.draw(16, torch.Generator().manual_seed(1))
    assert draws.blur_mask.any() and not draws.blur_mask.all()
    dense, ops = _count(skew.apply, images, draws, select=False)
    assert "nonzero" not in ops
    selected, ops = _count(skew.apply, images, draws, select=True)   # the CPU default
    assert "nonzero" in ops and torch.equal(dense, selected)


@pytest.mark.parametrize("tol", [1e-2, 1e-30])   # converges at a check / never converges
def test_sinkhorn_reads_its_checks_once_on_an_accelerator_and_agrees_with_the_host_loop(tol):
    similarities = torch.randn(20, 5, generator=torch.Generator().manual_seed(0))
    host, host_ops = _count(sinkhorn_knopp, similarities, tol=tol)
    assert host_ops["_local_scalar_dense"] >= 1   # the CPU loop reads each check (no sync on a CPU)
    at_end, ops = _count(sinkhorn_knopp, similarities, tol=tol, checks_at_end=True)   # the accelerator default
    assert ops["_local_scalar_dense"] == 0 and torch.equal(at_end, host)


def test_the_ema_is_one_fused_lerp_with_the_per_parameter_bits():
    torch.manual_seed(0)
    online = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    target = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    expected = [t.detach().clone().lerp_(o.detach(), 1 - 0.99)
                for t, o in zip(target.parameters(), online.parameters())]
    _, ops = _count(ema_update, target, online, 0.99)
    assert ops["_foreach_lerp_"] == 1 and ops["lerp_"] == 0
    assert all(torch.equal(t, e) for t, e in zip(target.parameters(), expected))

"""Paper A's MAR loss: A-MMD and its variants, the gamma schedule, FedMAR / DecMAR runs and resume."""

from __future__ import annotations

import math

import fl_resume_helper as helper
import numpy as np
import pytest
import torch

from dssl.federation import (
    ClientData,
    DecLConfig,
    DecLSimulator,
    FLConfig,
    FLSimulator,
    OptimizerConfig,
    create_strategy,
)
from dssl.federation.alignment import alignment_loss, cosine_gamma
from dssl.federation.alignments.a_mmd_code import a_mmd_code
from dssl.federation.alignments.cosine import cosine_alignment
from dssl.federation.alignments.mmd import a_mmd, bandwidth, mmd
from dssl.methods import create_method

pytestmark = pytest.mark.usefixtures("single_thread")


def sample(n: int = 64, d: int = 8, shift: float = 0.0, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=generator) + shift


# -- the alignment terms ----------------------------------------------------------------------------


def test_a_mmd_is_near_zero_for_one_distribution_and_grows_with_a_mean_shift():
    z = sample(seed=0)
    same = float(a_mmd(z, sample(seed=1)))
    assert abs(same) < 0.02  # unbiased estimate: around 0, either sign
    shifted = [float(a_mmd(z, sample(seed=1, shift=s))) for s in (0.5, 1.0, 2.0)]
    assert shifted[0] > 0.05 and shifted[0] < shifted[1] < shifted[2]
    assert -0.05 < float(a_mmd(z, z)) < 0  # Eq. 6's cross term keeps its diagonal (k = 1), the others not


def test_a_mmd_matches_a_hand_computed_value():
    z, z_bar = torch.tensor([[0.0], [2.0]]), torch.tensor([[1.0], [3.0]])
    # sigma = mean off-diagonal distance of z = 2; k = exp(-d^2 / 8)
    k = lambda d: math.exp(-d * d / 8)  # noqa: E731
    expected = (2 * k(2)) / 2 + (2 * k(2)) / 2 - 2 / 4 * (k(1) + k(3) + k(1) + k(1))
    assert bandwidth(z) == pytest.approx(2.0)
    assert float(a_mmd(z, z_bar)) == pytest.approx(expected, rel=1e-6)
    assert float(mmd(z, z_bar, 2.0)) == pytest.approx(expected, rel=1e-6)


def test_median_bandwidth_differs_from_the_mean():
    z = torch.tensor([[0.0], [1.0], [10.0]])  # off-diagonal distances 1, 9, 10 (each twice)
    assert bandwidth(z, "mean") == pytest.approx(20 / 3)
    assert bandwidth(z, "median") == pytest.approx(9.0)


@pytest.mark.parametrize("name", ["a_mmd", "a_mmd_median", "mmd", "cosine"])
def test_gradient_reaches_z_only(name):
    z = sample(n=16, seed=0).requires_grad_(True)
    z_bar = sample(n=16, seed=1, shift=1.0).requires_grad_(True)
    alignment_loss(name, z, z_bar).backward()
    assert z.grad is not None and float(z.grad.abs().sum()) > 0
    assert z_bar.grad is None  # z_bar is the received constant


def test_code_variant_takes_token_tensors_and_scales_the_cross_term_by_one_over_d():
    generator = torch.Generator().manual_seed(0)
    z = torch.randn(4, 3, 5, generator=generator).requires_grad_(True)
    z_bar = torch.randn(4, 3, 5, generator=generator).requires_grad_(True)
    value = a_mmd_code(z, z_bar)
    value.backward()
    assert z.grad is not None and z_bar.grad is None
    # Identical inputs: the within-sample sums keep their diagonals (B*D ones among B*B*D entries)
    # and the cross term is a mean over (a, b, d): the value is not 0, unlike the paper's A-MMD.
    same = a_mmd_code(z.detach(), z.detach())
    b, d = 4, 5
    with torch.no_grad():
        sigma = float(torch.cdist(z, z).mean())
        sq = ((z[:, None] - z[None, :]) ** 2).sum(dim=2)
        kernel = torch.exp(-sq / (2 * sigma**2))
    expected = 2 * kernel.sum() / (b * (b - 1)) - 2 * kernel.sum() / (b * b * d)
    assert float(same) == pytest.approx(float(expected), rel=1e-5) and float(same) > 0
    with pytest.raises(ValueError, match="token tensors"):
        a_mmd_code(sample(4, 5), sample(4, 5))


def test_cosine_alignment_is_zero_along_the_global_mean():
    direction = torch.tensor([[1.0, 2.0]])
    assert float(cosine_alignment(direction * torch.tensor([[1.0], [3.0]]),
                                  direction.repeat(4, 1))) == pytest.approx(0.0, abs=1e-6)
    assert float(cosine_alignment(torch.tensor([[-1.0, -2.0]]).repeat(2, 1),
                                  direction.repeat(2, 1))) == pytest.approx(2.0)


def test_gamma_schedule_ends_and_middle():
    assert cosine_gamma(0, 5, 0.1, 1e-3) == pytest.approx(0.1)
    assert cosine_gamma(5, 5, 0.1, 1e-3) == pytest.approx(1e-3)
    assert cosine_gamma(2.5, 5, 0.1, 1e-3) == pytest.approx((0.1 + 1e-3) / 2)
    assert cosine_gamma(9, 5, 0.1, 1e-3) == pytest.approx(1e-3)  # saturates past the horizon
    assert cosine_gamma(3, 5, 0.01, 0.01) == pytest.approx(0.01)  # gamma_max == gamma_min: constant


def test_strategy_options_are_checked():
    with pytest.raises(ValueError, match="has no option 'gama'.*gamma_max"):
        create_strategy("fedmar", gama=0.1)
    with pytest.raises(ValueError, match="alignment"):
        create_strategy("fedmar", alignment="l2")
    with pytest.raises(ValueError, match="gamma_min"):
        create_strategy("decmar", gamma_max=1e-3, gamma_min=0.1)
    strategy = create_strategy("decmar", alignment="a_mmd_code", z_summary="epoch_mean")
    assert strategy.hparams["alignment"] == "a_mmd_code" and strategy.hparams["z_summary"] == "epoch_mean"


# -- runs -------------------------------------------------------------------------------------------

NUM_CLIENTS, PER_CLIENT, BATCH = 4, 12, 6


def _build(kind: str, strategy: str = "", checkpoint_dir=None, rounds: int = 3, order: str = "mix_then_train",
           **options):
    torch.manual_seed(0)
    method = create_method("mae", "vit_small", 8, 1, decoder_dim=16, decoder_heads=2)
    images = helper.tiny_images(num=NUM_CLIENTS * PER_CLIENT)
    clients = [ClientData(images, np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT)) for i in range(NUM_CLIENTS)]
    common = dict(rounds=rounds, batch_size=BATCH, seed=1,
                  optimizer=OptimizerConfig(name="adamw", base_lr=0.05, weight_decay=0.05))
    if kind == "fl":
        return FLSimulator(method, clients, create_strategy(strategy or "fedmar", **options),
                           FLConfig(clients_per_round=2, **common), checkpoint_dir=checkpoint_dir)
    return DecLSimulator(method, clients, create_strategy(strategy or "decmar", **options), helper.RING,
                         DecLConfig(order=order, **common), checkpoint_dir=checkpoint_dir)


STEPS_PER_ROUND = {"fl": 2 * PER_CLIENT // BATCH, "decl": NUM_CLIENTS * PER_CLIENT // BATCH}


@pytest.mark.parametrize("kind", ["fl", "decl"])
@pytest.mark.parametrize("options", [{}, {"alignment": "a_mmd_code", "z_summary": "epoch_mean"}])
def test_mar_run_aligns_after_the_first_round_and_resumes_identically(kind, options, tmp_path):
    full = _build(kind, **options).run()
    assert "alignment" not in full.metrics[0]  # round 1 trains plain MIM: no z_bar yet
    for record in full.metrics[1:]:
        assert np.isfinite(record["alignment"]) and np.isfinite(record["method_loss"])
        assert 1e-3 <= record["gamma"] <= 0.1
    plain = _build(kind, strategy="fedavg").run()
    assert any(not torch.equal(v, plain.final_state[k]) for k, v in full.final_state.items())

    interrupted = _build(kind, checkpoint_dir=tmp_path, **options)
    helper.abort_after(interrupted, 2 * STEPS_PER_ROUND[kind] + 1)  # one step into round 3
    with pytest.raises(helper.Abort):
        interrupted.run()
    resumed = _build(kind, checkpoint_dir=tmp_path, **options).run()
    assert resumed.resumed_rounds == 2
    for key, value in full.final_state.items():
        assert torch.equal(value, resumed.final_state[key]), key
    assert [r["loss"] for r in resumed.metrics] == [r["loss"] for r in full.metrics]


def test_gamma_follows_participations_in_fl():
    simulator = _build("fl", rounds=4, horizon=2.0)
    result = simulator.run()
    strategy = simulator.strategy
    assert strategy.global_z is not None and strategy.global_z.shape == (BATCH, 96)
    expected = [np.mean([cosine_gamma(sum(c in r for r in result.schedule[:t]), 2.0, 0.1, 1e-3)
                         for c in result.schedule[t]]) for t in range(1, 4)]
    assert [r["gamma"] for r in result.metrics[1:]] == pytest.approx(expected, rel=1e-5)


def test_code_variant_needs_mae():
    torch.manual_seed(0)
    method = create_method("simsiam", "cnn_small", image_size=8, in_chans=1)
    images = helper.tiny_images(num=24)
    clients = [ClientData(images, np.arange(i * 12, (i + 1) * 12)) for i in range(2)]
    with pytest.raises(ValueError, match="needs MAE's token tensor"):
        FLSimulator(method, clients, create_strategy("fedmar", alignment="a_mmd_code"),
                    FLConfig(rounds=1, batch_size=6, clients_per_round=2))
    with pytest.raises(ValueError, match="runs in decl, not fl"):
        FLSimulator(method, clients, create_strategy("decmar"), FLConfig(rounds=1, batch_size=6, clients_per_round=2))


def test_alignment_is_computed_in_float32_under_bf16_autocast():
    z, z_bar = sample(n=16, seed=0), sample(n=16, seed=1, shift=0.5)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        value = alignment_loss("a_mmd", z, z_bar)
    assert value.dtype == torch.float32 and float(value) == pytest.approx(float(a_mmd(z, z_bar)), rel=1e-6)


def test_z_bar_is_the_server_mean_in_fl_and_the_neighbour_mean_in_decl():
    fl = _build("fl", rounds=2, aggregation="data_size")
    sent = []
    original = fl.strategy.server_step

    def recording_step(global_states, uploads, round_index):
        sent.append([u.extras["z"].clone() for u in uploads])
        return original(global_states, uploads, round_index)

    fl.strategy.server_step = recording_step
    fl.run()
    torch.testing.assert_close(fl.strategy.global_z, torch.stack(sent[-1]).mean(dim=0))  # equal client sizes

    decl = _build("decl", rounds=2, order="train_then_mix")
    decl.run()
    strategy = decl.strategy
    for i in range(NUM_CLIENTS):
        expected = sum(helper.RING[i, j] * strategy.sent_z[j] for j in range(NUM_CLIENTS))
        torch.testing.assert_close(strategy.neighbour_z[i], expected.float())

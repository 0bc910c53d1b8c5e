"""Orchestra (Lubana et al., ICML 2022): local clustering, the server's centroid fit, the loss, and runs."""

from __future__ import annotations

import math

import fl_resume_helper as helper
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dssl.federation import (ClientData, DecLConfig, DecLSimulator, FLConfig, FLSimulator, OptimizerConfig,
                             create_strategy)
from dssl.federation.strategies.orchestra import LOCAL_CENTROIDS, fit_global_centroids
from dssl.methods import create_method
from dssl.methods.orchestra import cluster_loss, local_clustering, rotate_batch
from dssl.methods.sinkhorn import sinkhorn_knopp

pytestmark = pytest.mark.usefixtures("single_thread")

SMALL = dict(num_global_centroids=8, num_local_centroids=4, memory_size=16, proj_hidden_dim=16, proj_output_dim=8)
CLIENTS, PER_CLIENT, BATCH, SIZE = 3, 8, 4, 16


def orchestra(**hparams):
    torch.manual_seed(0)
    return create_method("orchestra", "cnn_small", SIZE, 1, **{**SMALL, **hparams})


# -- the defining rules on constructed cases ----------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_local_clustering_gives_the_normalised_means_of_equal_size_groups(seed):
    memory = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [-0.6, 0.8]])
    centroids = local_clustering(memory, 2, torch.Generator().manual_seed(seed))
    # By hand: {(1, 0), (0.8, 0.6)} -> (0.9, 0.3) / |.|, {(0, 1), (-0.6, 0.8)} -> (-0.3, 0.9) / |.|,
    # whichever two distinct rows the clustering starts from (the equal-size constraint splits 2 + 2).
    expected = torch.tensor([[0.9, 0.3], [-0.3, 0.9]]) / math.sqrt(0.9)
    found = sorted(centroids.tolist(), reverse=True)
    torch.testing.assert_close(torch.tensor(found), expected)


def test_local_clustering_needs_enough_memory():
    with pytest.raises(ValueError, match="local centroids"):
        local_clustering(torch.eye(3), 4)


def _fit_objective(centroids, points):
    similarities = points @ centroids.T
    target = sinkhorn_knopp(similarities, 0.04)
    return float(-F.cosine_similarity(target, torch.softmax(similarities / 0.1, dim=1), dim=1).mean())


def test_server_fit_partitions_the_local_centroids_consistently():
    torch.manual_seed(0)
    axes = torch.eye(3)
    local = F.normalize(torch.cat([axes[0] + 0.05 * torch.randn(4, 3), axes[1] + 0.05 * torch.randn(4, 3)]), dim=1)
    start = F.normalize(torch.randn(2, 3), dim=1)
    fitted = fit_global_centroids(start, local)
    torch.testing.assert_close(fitted.norm(dim=1), torch.ones(2))
    assert _fit_objective(start, local) > -0.7 and _fit_objective(fitted, local) < -0.99
    nearest = (local @ fitted.T).argmax(dim=1)
    assert len(set(nearest[:4].tolist())) == 1 and len(set(nearest[4:].tolist())) == 1  # one centroid per group
    assert nearest[0] != nearest[4]                                                  # different groups apart
    assert torch.equal(fit_global_centroids(start, local, steps=0), start)


def test_cluster_loss_and_target_assignment_by_hand():
    # P = (1/2, 1/2) against softmax(0, ln 3) = (1/4, 3/4): 1/2 (ln 4 + ln 4/3).
    loss = cluster_loss(torch.tensor([[0.0, math.log(3.0)]]), torch.tensor([[0.5, 0.5]]))
    assert float(loss) == pytest.approx(0.5 * (math.log(4) + math.log(4 / 3)))
    method = orchestra(proj_output_dim=2, num_global_centroids=2, num_local_centroids=2)
    method.centroids.copy_(torch.eye(2))
    p = method.assign(torch.tensor([[1.0, 0.0]]))  # softmax((1, 0) / 0.1)
    torch.testing.assert_close(p, torch.tensor([[1 / (1 + math.exp(-10)), 1 / (1 + math.exp(10))]]))
    sinkhorn = orchestra(proj_output_dim=2, num_global_centroids=2, num_local_centroids=2, target_assignment="sinkhorn")
    sinkhorn.centroids.copy_(torch.eye(2))
    balanced = sinkhorn.assign(torch.tensor([[1.0, 0.0], [0.9, math.sqrt(0.19)]]))
    torch.testing.assert_close(balanced.sum(dim=0), torch.ones(2), atol=2e-2, rtol=0)  # equal-size columns (tol 1e-2)


class _Unchanged(torch.nn.Module):
    def forward(self, images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return images


def test_loss_is_the_clustering_cross_entropy_plus_the_rotation_loss():
    method = orchestra(rotation_weight=0.5)
    method.transform = _Unchanged()  # views = the images themselves
    images = torch.rand(BATCH, 1, SIZE, SIZE)
    out = method.training_loss(images, generator=torch.Generator().manual_seed(5))
    turns = torch.randint(4, (BATCH,), generator=torch.Generator().manual_seed(5))
    online = method.online_projection(images)
    expected_cluster = cluster_loss(online @ method.centroids.T / 0.1, method.assign(method.target_projection(images)))
    rotated = rotate_batch(images, turns)
    expected_rotation = F.cross_entropy(method.rotation_head(method.projector(method.encoder(rotated))), turns)
    torch.testing.assert_close(out["cluster_loss"], expected_cluster.detach())
    torch.testing.assert_close(out["rotation_loss"], expected_rotation.detach())
    torch.testing.assert_close(out["loss"], expected_cluster + 0.5 * expected_rotation)
    assert torch.equal(rotate_batch(images, torch.full((BATCH,), 2)), images.flip(2, 3))


def test_gradient_reaches_the_online_networks_only_and_the_target_follows_by_ema():
    method = orchestra()
    out = method.training_loss(torch.rand(BATCH, 1, SIZE, SIZE), generator=torch.Generator().manual_seed(0))
    out["loss"].backward()
    for module in (method.encoder, method.projector, method.rotation_head):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())
    for module in (method.target_encoder, method.target_projector):
        assert all(p.grad is None and not p.requires_grad for p in module.parameters())
    assert not method.centroids.requires_grad and not method.memory.requires_grad
    online, target = next(method.projector.parameters()), next(method.target_projector.parameters())
    with torch.no_grad():
        online.add_(1.0)
    before = target.clone()
    method.after_optimizer_step()
    torch.testing.assert_close(target, 0.996 * before + 0.004 * online)


def test_memory_is_a_fifo_of_target_projections_filled_without_touching_the_target_statistics():
    method = orchestra(memory_size=4, num_local_centroids=2)
    method.memory.copy_(torch.arange(4.0)[:, None].expand(4, 8))
    method.push_memory(torch.full((2, 8), 9.0))
    assert method.memory[:, 0].tolist() == [2.0, 3.0, 9.0, 9.0]
    statistics = {k: v.clone() for k, v in method.target_encoder.named_buffers()}
    method.fill_memory(torch.rand(4, 1, SIZE, SIZE), torch.Generator().manual_seed(0))
    torch.testing.assert_close(method.memory.norm(dim=1), torch.ones(4))
    for key, value in method.target_encoder.named_buffers():
        assert torch.equal(value, statistics[key]), key
    assert method.client_state_keys() == ["memory"]  # the default target is shared (stateless clients)
    local = orchestra(local_target=True)
    kept = local.client_state_keys()
    assert "memory" in kept and any(k.startswith("target_encoder.") for k in kept)


def test_bad_options_fail_loudly():
    with pytest.raises(ValueError, match="target_assignment"):
        orchestra(target_assignment="argmax")
    with pytest.raises(ValueError, match="num_local_centroids"):
        orchestra(num_local_centroids=32)
    with pytest.raises(ValueError, match="server_steps"):
        create_strategy("orchestra", server_steps=-1)
    with pytest.raises(ValueError, match="method 'orchestra'"):
        create_strategy("orchestra").setup(create_method("simsiam", "cnn_small", SIZE, 1))
    images = helper.tiny_images(num=CLIENTS * PER_CLIENT, size=SIZE)
    clients = [ClientData(images, np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT)) for i in range(CLIENTS)]
    with pytest.raises(ValueError, match="runs in fl, not decl"):  # before any training
        DecLSimulator(orchestra(), clients, create_strategy("orchestra"), np.full((3, 3), 1 / 3),
                      DecLConfig(rounds=1, batch_size=BATCH))


# -- runs ---------------------------------------------------------------------------------------

def _build(rounds: int = 2, checkpoint_dir=None):
    method = orchestra()
    images = helper.tiny_images(num=CLIENTS * PER_CLIENT, size=SIZE)
    clients = [ClientData(images, np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT)) for i in range(CLIENTS)]
    config = FLConfig(rounds=rounds, batch_size=BATCH, clients_per_round=2, seed=1,
                      optimizer=OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=1e-4))
    return FLSimulator(method, clients, create_strategy("orchestra", server_steps=50), config,
                       checkpoint_dir=checkpoint_dir)


class _Uploads:
    """Records the uploads the strategy makes."""

    def __init__(self, simulator):
        self.seen = []
        original = simulator.strategy.client_upload

        def recording(client_id, method, local_state, ctx):
            upload = original(client_id, method, local_state, ctx)
            self.seen.append((ctx.round, upload))
            return upload

        simulator.strategy.client_upload = recording


def test_round_zero_only_clusters_then_clients_train_against_the_fitted_centroids():
    simulator = _build(rounds=2)
    initial = simulator.global_states[0]["centroids"].clone()
    uploads = _Uploads(simulator)
    result = simulator.run()
    first, second = result.metrics
    assert first["steps"] == 0 and math.isnan(first["loss"])
    assert second["steps"] > 0 and np.isfinite(second["loss"]) and np.isfinite(second["rotation_loss"])
    assert {r for r, _ in uploads.seen} == {0, 1}
    for _, upload in uploads.seen:
        assert upload.extras[LOCAL_CENTROIDS].shape == (SMALL["num_local_centroids"], SMALL["proj_output_dim"])
        assert "memory" not in upload.state  # the memory never leaves its client
    assert not torch.equal(result.global_states[0]["centroids"], initial)
    for state in result.global_states:
        assert "memory" not in state
    memories = [simulator.local_states[c]["model"]["memory"] for c in range(CLIENTS) if simulator.local_states[c]]
    assert len(memories) >= 2 and not torch.equal(memories[0], memories[1])


def test_orchestra_run_resumes_bit_identically(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        full = _build(rounds=3).run()
        interrupted = _build(rounds=3, checkpoint_dir=tmp_path)
        helper.abort_after(interrupted, 2 * PER_CLIENT // BATCH + 1)  # round 1 trains nothing; one step into round 3
        with pytest.raises(helper.Abort):
            interrupted.run()
        resumed = _build(rounds=3, checkpoint_dir=tmp_path).run()
    finally:
        torch.set_num_threads(threads)
    assert resumed.resumed_rounds == 2
    for key, value in full.final_state.items():
        assert torch.equal(value, resumed.final_state[key]), key
    np.testing.assert_array_equal([r["loss"] for r in resumed.metrics], [r["loss"] for r in full.metrics])

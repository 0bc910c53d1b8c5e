"""FeatARC: cluster selection by feature agreement, the alignment term, the final cluster, a tiny run."""

import numpy as np
import pytest
import torch

from dssl.data.datasets import DATASETS, load_split
from dssl.data.imageset import ArrayImageSet, resized
from dssl.federation import (
    ClientData,
    DecLConfig,
    DecLSimulator,
    FLConfig,
    FLSimulator,
    OptimizerConfig,
    create_strategy,
)
from dssl.federation.strategies.base import ClientContext, Upload
from dssl.federation.strategies.featarc import (
    CLUSTER_SCORES,
    LOCAL_FEATURE_MODEL,
    alignment_scores,
    feature_alignment_loss,
    most_joined,
    select_cluster,
)
from dssl.methods import create_method

import fl_resume_helper as helper

pytestmark = pytest.mark.usefixtures("single_thread")


def simclr(image_size: int = 8, **hparams):
    """SimCLR on cnn_small with projections as wide as the encoder features (FeatARC needs it)."""
    torch.manual_seed(0)
    width = create_method("simclr", "cnn_small", image_size, 1).encoder.feature_dim
    return create_method("simclr", "cnn_small", image_size, 1, proj_output_dim=width, **hparams)


# -- clusters --------------------------------------------------------------------------------------

def test_every_cluster_is_initialised_as_the_model_is_built():
    """ResNet-18's layer1 convolutions come from torchvision's Kaiming init, std sqrt(2 / (64 * 3 * 3)) = 0.059
    (PyTorch's default conv init, U(+-1/sqrt(64 * 9)), has std 0.024): cluster 1 has it too, and a model of
    another seed draws another cluster 1."""
    key = "encoder.layer1.0.conv1.weight"
    clusters = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        method = create_method("simclr", "resnet18_cifar", 8, 3, proj_hidden_dim=16, proj_output_dim=512)
        strategy = create_strategy("featarc", num_clusters=2)
        strategy.setup(method)
        clusters.append(strategy.initial_global_states({k: v.clone() for k, v in method.state_dict().items()}))
    kaiming = (2 / (64 * 9)) ** 0.5
    for states in clusters:
        assert [float(s[key].std()) for s in states] == pytest.approx([kaiming] * 2, rel=0.05)
        assert not torch.equal(states[0][key], states[1][key])
        assert torch.equal(states[1]["encoder.bn1.weight"], torch.ones(64))   # BN as built: weight 1
    assert not torch.equal(clusters[0][1][key], clusters[1][1][key])


# -- selection -------------------------------------------------------------------------------------

def test_alignment_by_hand():
    local = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    aligned = torch.tensor([[3.0, 0.0], [0.0, 1.0]])  # cos 1 and 1 -> 1
    mixed = torch.tensor([[1.0, 1.0], [0.0, -1.0]])  # cos 1/sqrt(2) and -1
    scores = alignment_scores(local, [mixed, aligned])
    assert scores == pytest.approx([(2 ** -0.5 - 1) / 2, 1.0])
    assert select_cluster(local, [mixed, aligned]) == 1
    assert select_cluster(local, [aligned, aligned]) == 0  # ties: the first


def clients():
    rng = np.random.default_rng(0)
    images = ArrayImageSet(rng.integers(0, 256, size=(16, 8, 8, 1), dtype=np.uint8), np.zeros(16, int), 1)
    return [ClientData(images, np.arange(i * 8, (i + 1) * 8)) for i in range(2)]


def test_clients_join_the_cluster_of_highest_agreement_and_clusters_average_apart():
    method = simclr()
    strategy = create_strategy("featarc", num_clusters=2)
    simulator = FLSimulator(method, clients(), strategy,
                            FLConfig(rounds=2, batch_size=4, clients_per_round=2, seed=0,
                                     optimizer=OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=0.0)))
    initial = [dict(s) for s in simulator.global_states]
    assert len(initial) == 2
    assert not torch.equal(initial[0]["encoder.features.0.weight"], initial[1]["encoder.features.0.weight"])
    chosen = []
    original = strategy.select_global

    def record(client_id, global_states, local_state, ctx):
        index = original(client_id, global_states, local_state, ctx)
        chosen.append((ctx.round, client_id, index, list(ctx.scratch[CLUSTER_SCORES])))
        return index

    strategy.select_global = record
    result = simulator.run()
    for _, _, index, scores in chosen:
        assert index == int(np.argmax(scores))
    # Round 1: each client's own model is its initial cluster i mod 2, which agrees with itself (score 1).
    first = {client: (index, scores) for r, client, index, scores in chosen if r == 0}
    assert first[0][0] == 0 and first[0][1][0] == pytest.approx(1.0)
    assert first[1][0] == 1 and first[1][1][1] == pytest.approx(1.0)
    # A cluster nobody chose keeps its model; a chosen one changes.
    picked = {index for r, _, index, _ in chosen if r == 1}
    for j, state in enumerate(result.global_states):
        same = torch.equal(state["encoder.features.0.weight"], initial[j]["encoder.features.0.weight"])
        assert same == (j not in {i for _, _, i, _ in chosen})
    assert picked and all(LOCAL_FEATURE_MODEL in s for s in simulator.local_states)
    # The result is the cluster most clients joined in the last round.
    last = {client: index for r, client, index, _ in chosen if r == 1}
    assert result.final_index == most_joined(last, 2)
    assert all(torch.equal(v, result.global_states[result.final_index][k]) for k, v in result.final_state.items()
               if k in result.global_states[result.final_index])


# -- the alignment term ------------------------------------------------------------------------------

def test_alignment_term_by_hand():
    z1 = torch.tensor([[3.0, 4.0], [0.0, 1.0]], requires_grad=True)
    z2 = torch.tensor([[1.0, 0.0], [0.0, -1.0]], requires_grad=True)
    target = torch.tensor([[0.0, 2.0], [5.0, 0.0]], requires_grad=True)
    # t = [[0, 1], [1, 0]]; <t, z1/|z1|> = 0.8, 0; <t, z2/|z2|> = 0, 0 -> -1/2 (0.4 + 0) = -0.2
    term = feature_alignment_loss(z1, z2, target)
    assert float(term.detach()) == pytest.approx(-0.2)
    term.backward()
    assert z1.grad is not None and z1.grad.abs().sum() > 0
    assert z2.grad is not None and target.grad is None  # the cluster features are a fixed target
    # d/dz1[0] of -1/4 <t, z/|z|> at z = (3, 4), t = (0, 1): -1/4 (t - <t,u> u) / |z| with u = (0.6, 0.8)
    expected = -0.25 * (torch.tensor([0.0, 1.0]) - 0.8 * torch.tensor([0.6, 0.8])) / 5.0
    assert torch.allclose(z1.grad[0], expected)


def _context(data: ClientData, generator: torch.Generator) -> ClientContext:
    return ClientContext(0, 0, 1, 0, data, torch.device("cpu"), generator)


def test_client_loss_is_simclr_plus_the_weighted_term_and_only_the_client_model_gets_gradients():
    method = simclr(temperature=0.5)
    strategy = create_strategy("featarc", align_weight=0.3)
    data = clients()[0]
    simulator = FLSimulator(method, [data], strategy, FLConfig(rounds=1, batch_size=4, clients_per_round=1))
    cluster = simulator.global_states[1]
    strategy._freeze(cluster)
    images = data.images.get_batch(data.indices[:4]).float() / 255
    out = strategy.client_loss(method, images, _context(data, torch.Generator().manual_seed(5)))
    plain = method.training_loss(images, generator=torch.Generator().manual_seed(5))["loss"]
    assert torch.allclose(out["method_loss"], plain)  # same views: the SimCLR loss of the method itself
    assert torch.allclose(out["loss"], plain + 0.3 * out["alignment"])
    # The target is cluster 1's encoder, frozen, in evaluation mode.
    reference = simclr()
    reference.load_state_dict({**method.state_dict(), **cluster})
    reference.eval()
    with torch.no_grad():
        target = reference.encoder(images)
    _, z1, z2 = method.project_views(images, torch.Generator().manual_seed(5))
    assert torch.allclose(out["alignment"], feature_alignment_loss(z1, z2, target), atol=1e-6)
    method.zero_grad()
    out["loss"].backward()
    assert all(p.grad is not None for p in method.encoder.parameters())
    assert all(p.grad is not None for p in method.projector.parameters())
    assert all(not p.requires_grad and p.grad is None for p in strategy.frozen.parameters())


def test_alignment_is_float32_under_bf16_autocast():
    z = torch.randn(4, 8)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        term = feature_alignment_loss(z.bfloat16(), z.bfloat16(), z.bfloat16())
    assert term.dtype == torch.float32 and float(term) == pytest.approx(-1.0, abs=1e-2)


# -- the result and the frameworks -------------------------------------------------------------------

def test_final_cluster_is_the_one_most_clients_joined_last_ties_to_the_lowest():
    assert most_joined({0: 1, 1: 0, 2: 1}, 2) == 1
    assert most_joined({0: 1, 1: 0}, 2) == 0
    assert most_joined({4: 2}, 3) == 2
    assert most_joined({}, 2) == 0
    strategy = create_strategy("featarc", num_clusters=3)
    strategy.receive_uploads([Upload(0, 8, {}, model_index=2)], 0)
    strategy.receive_uploads([Upload(0, 8, {}, model_index=1), Upload(1, 8, {}, model_index=0)], 1)
    assert strategy.choices == {0: 1, 1: 0}  # a new round forgets the previous one's choices
    assert strategy.final_global_index([{}, {}, {}]) == 0
    restored = create_strategy("featarc", num_clusters=3)
    restored.load_state_dict(strategy.state_dict())
    assert restored.final_global_index([{}, {}, {}]) == 0 and restored.choices == {0: 1, 1: 0}


def test_featarc_runs_in_fl_only_and_needs_simclr_with_matching_widths():
    ring = np.full((2, 2), 0.5)
    with pytest.raises(ValueError, match="runs in fl, not decl"):
        DecLSimulator(simclr(), clients(), create_strategy("featarc"), ring, DecLConfig(rounds=1, batch_size=4))
    fl = FLConfig(rounds=1, batch_size=4, clients_per_round=2)
    with pytest.raises(ValueError, match="proj_output_dim: 128"):
        FLSimulator(create_method("simclr", "cnn_small", 8, 1), clients(), create_strategy("featarc"), fl)
    with pytest.raises(ValueError, match="trains SimCLR"):
        FLSimulator(create_method("simsiam", "cnn_small", 8, 1), clients(), create_strategy("featarc"), fl)
    with pytest.raises(ValueError, match="no option 'gamma'"):
        create_strategy("featarc", gamma=1.0)


# -- a tiny run on digits ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    folder = tmp_path_factory.mktemp("digits")
    DATASETS["digits"].prepare({}, folder)
    return resized(load_split(folder, "train"), 16)


def _tiny_run(images, strategy: str = "featarc", checkpoint_dir=None, abort_at_step: int | None = None):
    method = simclr(16, temperature=0.5, flip_p=0.0)
    data = [ClientData(images, np.arange(i * 48, (i + 1) * 48)) for i in range(3)]
    simulator = FLSimulator(method, data, create_strategy(strategy),
                            FLConfig(rounds=2, batch_size=16, clients_per_round=3, seed=1,
                                     optimizer=OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=1e-4)),
                            checkpoint_dir=checkpoint_dir)
    if abort_at_step is not None:
        helper.abort_after(simulator, abort_at_step)
    return simulator.run()


def test_tiny_digits_run_is_finite_and_resumes_bit_identically(digits, tmp_path):
    full = _tiny_run(digits)
    for record in full.metrics:
        assert all(np.isfinite(record[k]) for k in ("loss", "method_loss", "alignment"))
        assert -1.0 <= record["alignment"] <= 1.0
    assert full.final_index in (0, 1)
    steps_per_round = 3 * 48 // 16
    with pytest.raises(helper.Abort):
        _tiny_run(digits, checkpoint_dir=tmp_path, abort_at_step=steps_per_round + 2)  # into round 2
    resumed = _tiny_run(digits, checkpoint_dir=tmp_path)
    assert resumed.resumed_rounds == 1 and resumed.final_index == full.final_index
    for a, b in zip(full.global_states, resumed.global_states):
        assert all(torch.equal(v, b[k]) for k, v in a.items())
    assert all(torch.equal(v, resumed.final_state[k]) for k, v in full.final_state.items())
    assert [r["loss"] for r in resumed.metrics] == [r["loss"] for r in full.metrics]

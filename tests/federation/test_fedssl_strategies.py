"""Paper B's FedSSL design space, FedU and FedEMA, and L-DAWA, on hand-built states."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dssl.data.imageset import ArrayImageSet
from dssl.federation import ClientData, DecLConfig, DecLSimulator, FLConfig, FLSimulator, OptimizerConfig
from dssl.federation import Upload, create_strategy
from dssl.federation.state import load_state_
from dssl.federation.strategies.base import LOCAL_MODEL, ClientContext
from dssl.federation.strategies.divergence import LAST_ROUND, conv_kernel_keys
from dssl.methods import create_method

pytestmark = pytest.mark.usefixtures("single_thread")

GLOBAL, LOCAL = 1.0, 3.0


def byol(**hparams):
    torch.manual_seed(0)
    return create_method("byol", "cnn_small", 8, 1, proj_hidden_dim=16, proj_output_dim=8, **hparams)


def filled(method, value: float, keys=None) -> dict:
    state = method.state_dict()
    return {k: torch.full_like(state[k], value) for k in (keys if keys is not None else state)}


def ctx(client_id: int = 0, round_index: int = 1) -> ClientContext:
    return ClientContext(client_id, round_index, 5, 1, tiny_clients()[0], torch.device("cpu"), torch.Generator())


def start_of(strategy, method, global_value=GLOBAL, local_value=LOCAL, client_id=0, local_state=None):
    """The start state of a client that kept ``local_value`` everywhere, given a ``global_value`` model."""
    strategy.setup(method)
    global_state = filled(method, global_value, strategy.shared_keys)
    if local_state is None:  # it trained in the previous round (ctx's round 1)
        local_state = {LOCAL_MODEL: filled(method, local_value, strategy.kept_keys), LAST_ROUND: 0}
    return strategy.client_update_start(client_id, global_state, local_state, ctx(client_id)), global_state


def values(start, keys) -> set[float]:
    return {float(start[k].reshape(-1)[0]) for k in keys if start[k].is_floating_point()}


# -- FedSSL: the design space ------------------------------------------------------------------

@pytest.mark.parametrize("update, online, target", [
    ("online", GLOBAL, LOCAL), ("target", LOCAL, GLOBAL), ("both", GLOBAL, GLOBAL), ("none", LOCAL, LOCAL)])
def test_update_encoder_chooses_which_local_networks_the_global_replaces(update, online, target):
    method = byol()
    strategy = create_strategy("fedssl", update_encoder=update)
    start, _ = start_of(strategy, method)
    assert values(start, method.part_keys("online")) == {online}
    assert values(start, method.part_keys("target")) == {target}
    assert values(start, method.part_keys("predictor")) == {GLOBAL}


def test_update_encoder_ema_blends_the_parameters_and_takes_the_global_statistics():
    method = byol()
    strategy = create_strategy("fedssl", update_encoder="ema", encoder_ema=0.25)
    start, _ = start_of(strategy, method)
    params = {n for n, _ in method.named_parameters()}
    online = method.part_keys("online")
    assert values(start, [k for k in online if k in params]) == {0.25 * LOCAL + 0.75 * GLOBAL}
    assert values(start, [k for k in online if k not in params]) == {GLOBAL}  # BN running statistics
    assert values(start, method.part_keys("target")) == {LOCAL}


def test_update_predictor_local_keeps_the_clients_predictor():
    method = byol()
    start, _ = start_of(create_strategy("fedssl", update_predictor="local"), method)
    assert values(start, method.part_keys("predictor")) == {LOCAL}
    assert values(start, method.part_keys("online")) == {GLOBAL}


def test_aggregate_encoder_target_uploads_the_target_in_the_online_networks_place():
    method = byol()
    with torch.no_grad():
        for p in method.target_encoder.parameters():
            p.fill_(7.0)
    strategy = create_strategy("fedssl", aggregate_encoder="target")
    strategy.setup(method)
    assert set(strategy.shared_keys) == set(method.part_keys("online")) | set(method.part_keys("predictor"))
    local_state = {}
    upload = strategy.client_upload(0, method, local_state, ctx())
    assert torch.equal(upload.state["encoder.features.0.weight"], method.target_encoder.features[0].weight)
    assert set(local_state[LOCAL_MODEL]) >= set(method.part_keys("target"))


def test_aggregate_encoder_both_averages_the_targets_on_their_own():
    method = byol()
    strategy = create_strategy("fedssl", aggregate_encoder="both", update_encoder="both")
    strategy.setup(method)
    assert set(method.part_keys("target")) <= set(strategy.shared_keys)
    global_state = filled(method, GLOBAL, method.part_keys("online") + method.part_keys("predictor"))
    global_state.update(filled(method, 5.0, method.part_keys("target")))
    local_state = {LOCAL_MODEL: filled(method, LOCAL, strategy.kept_keys)}
    start = strategy.client_update_start(0, global_state, local_state, ctx())
    assert values(start, method.part_keys("target")) == {5.0}
    assert values(start, method.part_keys("online")) == {GLOBAL}


def test_first_participation_takes_everything_from_the_global_model():
    method = byol()
    strategy = create_strategy("fedssl", update_encoder="none", update_predictor="local")
    start, global_state = start_of(strategy, method, local_state={})
    for key in method.part_keys("target"):
        assert torch.equal(start[key], global_state[method.online_key_of(key)])
    assert values(start, method.part_keys("predictor")) == {GLOBAL}


def test_bad_design_space_options_fail_loudly():
    simclr = create_method("simclr", "cnn_small", 8, 1)
    with pytest.raises(ValueError, match="no EMA target"):
        create_strategy("fedssl", update_encoder="target").setup(simclr)
    with pytest.raises(ValueError, match="update_encoder: must be one of"):
        create_strategy("fedssl", update_encoder="online_target")
    with pytest.raises(ValueError, match="encoder_ema"):
        create_strategy("fedssl", update_encoder="ema")
    with pytest.raises(ValueError, match="has no option 'upload'"):
        create_strategy("fedssl", upload="online")
    with pytest.raises(ValueError, match="divergence: must be one of"):
        create_strategy("fedema", divergence="flat")
    with pytest.raises(ValueError, match="skipped: must be one of"):
        create_strategy("fedema", skipped="keep")
    with pytest.raises(ValueError, match="paper_flat"):
        create_strategy("fedu", divergence_of="predictor")
    with pytest.raises(ValueError, match="has none"):
        create_strategy("fedu").setup(create_method("moco", "cnn_small", 8, 1))


def tiny_clients(n=3, per=8):
    rng = np.random.default_rng(0)
    images = ArrayImageSet(rng.integers(0, 256, size=(n * per, 8, 8, 1), dtype=np.uint8), np.zeros(n * per, int), 1)
    return [ClientData(images, np.arange(i * per, (i + 1) * per)) for i in range(n)]


def fl_run(strategy, rounds=2, per_round=3, **kwargs):
    config = FLConfig(rounds=rounds, batch_size=4, clients_per_round=per_round, seed=2,
                      optimizer=OptimizerConfig(name="sgd", base_lr=0.5, weight_decay=0.0))
    simulator = FLSimulator(byol(), tiny_clients(), strategy, config, **kwargs)
    return simulator, simulator.run()


def test_fedssl_defaults_are_fedavg_with_the_target_kept_local():
    _, fedavg = fl_run(create_strategy("fedavg"))
    _, fedssl = fl_run(create_strategy("fedssl"))
    for key, value in fedavg.final_state.items():
        assert torch.equal(value, fedssl.final_state[key]), key


# -- FedU --------------------------------------------------------------------------------------

def fedu_case(threshold, divergence="paper_flat", drift=None):
    """Global online params 1; the client's online params 1 except one tensor shifted by 0.1 per element."""
    method = byol()
    strategy = create_strategy("fedu", threshold=threshold, divergence=divergence)
    strategy.setup(method)
    global_state = filled(method, GLOBAL, strategy.shared_keys)
    kept = filled(method, GLOBAL, strategy.kept_keys)
    kept.update(filled(method, LOCAL, method.part_keys("predictor")))
    shifted = "projector.0.weight"
    kept[shifted] = kept[shifted] + 0.1
    local_state = {LOCAL_MODEL: kept}
    if drift is not None:
        local_state["drift"] = drift
    start = strategy.client_update_start(0, global_state, local_state, ctx())
    return method, start, local_state, 0.1 * math.sqrt(kept[shifted].numel())


@pytest.mark.parametrize("above", [False, True])
def test_fedu_keeps_the_local_predictor_when_the_divergence_exceeds_the_threshold(above):
    method, _, _, divergence = fedu_case(0.0)
    threshold = divergence * (0.9 if above else 1.1)
    method, start, local_state, _ = fedu_case(threshold)
    assert local_state["fedu"]["divergence"] == pytest.approx(divergence)
    assert values(start, method.part_keys("predictor")) == ({LOCAL} if above else {GLOBAL})
    assert values(start, ["projector.0.weight"]) == {GLOBAL}  # the encoder is always replaced


def test_fedu_code_divergence_is_the_stored_drift():
    method, start, local_state, _ = fedu_case(0.4, divergence="code", drift=0.5)
    assert local_state["fedu"] == {"divergence": 0.5, "global_predictor": False}
    assert values(start, method.part_keys("predictor")) == {LOCAL}
    method, start, _, _ = fedu_case(0.4, divergence="code", drift=0.3)
    assert values(start, method.part_keys("predictor")) == {GLOBAL}


# -- FedEMA ------------------------------------------------------------------------------------

def test_fedema_constant_lambda_gives_the_exact_mu_and_blend():
    method = byol()
    params = [k for k, _ in method.named_parameters() if k in method.part_keys("online")]
    divergence = math.sqrt(sum((LOCAL - GLOBAL) ** 2 * method.state_dict()[k].numel() for k in params))
    scale = 0.4 / divergence  # lambda chosen so that mu = 0.4
    mu = min(scale * divergence, 1.0)
    strategy = create_strategy("fedema", scaler="constant", ema_lambda=scale, divergence="paper_flat")
    strategy.setup(method)
    global_state = filled(method, GLOBAL, strategy.shared_keys)
    kept = filled(method, LOCAL, strategy.kept_keys)
    local_state = {LOCAL_MODEL: kept, LAST_ROUND: 0}
    start = strategy.client_update_start(0, global_state, local_state, ctx())
    assert local_state["fedema"]["divergence"] == pytest.approx(divergence)
    assert local_state["fedema"]["mu"] == pytest.approx(mu)
    blended = mu * LOCAL + (1 - mu) * GLOBAL
    pred_params = [k for k in method.part_keys("predictor") if k in strategy.param_keys]
    for key in params + pred_params:
        torch.testing.assert_close(start[key], torch.full_like(start[key], blended))
    assert values(start, method.part_keys("target")) == {LOCAL}  # the EMA target stays local
    assert values(start, [k for k in method.part_keys("online") if k not in strategy.param_keys
                          and start[k].is_floating_point()]) == {GLOBAL}
    # A large divergence caps mu at 1: the client keeps its own online network.
    strategy = create_strategy("fedema", scaler="constant", ema_lambda=1.0, divergence="paper_flat")
    start, _ = start_of(strategy, method)
    assert values(start, params) == {LOCAL}


def test_fedema_autoscaler_sets_lambda_once_so_that_mu_equals_tau():
    method = byol()
    strategy = create_strategy("fedema", tau=0.7, divergence="paper_flat")
    strategy.setup(method)
    trained = filled(method, LOCAL, strategy.shared_keys)
    new_global = filled(method, GLOBAL, strategy.shared_keys)
    params = [k for k in method.part_keys("online") if k in strategy.param_keys]
    divergence = math.sqrt(sum((LOCAL - GLOBAL) ** 2 * trained[k].numel() for k in params))
    strategy.server_step([new_global], [Upload(4, 8, trained)], 0)
    assert strategy.lambdas == {"4": pytest.approx(0.7 / divergence)}
    strategy.server_step([filled(method, 9.0, strategy.shared_keys)], [Upload(4, 8, trained)], 1)
    assert strategy.lambdas["4"] == pytest.approx(0.7 / divergence)  # measured once
    local_state = {LOCAL_MODEL: filled(method, LOCAL, strategy.kept_keys), LAST_ROUND: 0}
    strategy.client_update_start(4, new_global, local_state, ctx(4))
    assert local_state["fedema"]["mu"] == pytest.approx(0.7)
    restored = create_strategy("fedema", tau=0.7, divergence="paper_flat")
    restored.load_state_dict(strategy.state_dict())
    assert restored.lambdas == strategy.lambdas


def test_fedema_lambdas_are_checkpointed_per_client(tmp_path):
    simulator, result = fl_run(create_strategy("fedema"), rounds=2, checkpoint_dir=tmp_path)
    stored = torch.load(tmp_path / "checkpoint.pt", weights_only=True)["strategy"]["lambdas"]
    assert sorted(stored) == ["0", "1", "2"] and stored == simulator.strategy.lambdas
    assert all(v > 0 for v in stored.values())
    for client in range(3):  # second participation: blended by a divergence-aware mu in [0, 1]
        record = simulator.local_states[client]["fedema"]
        assert 0.0 <= record["mu"] <= 1.0 and record["divergence"] > 0
    assert all(np.isfinite(r["loss"]) for r in result.metrics)


def test_fedema_code_divergence_autoscales_from_the_first_drift():
    method = byol()
    strategy = create_strategy("fedema", divergence="code", tau=0.8)
    strategy.setup(method)
    assert strategy.measured_keys and all(len(method.state_dict()[k].shape) == 4 for k in strategy.measured_keys)
    new_global = filled(method, GLOBAL, strategy.shared_keys)
    strategy.server_step([new_global], [Upload(1, 8, filled(method, LOCAL, strategy.shared_keys),
                                               extras={"drift": 0.4})], 0)
    assert strategy.lambdas == {"1": pytest.approx(2.0)}  # tau / the drift of its first local training
    local_state = {LOCAL_MODEL: filled(method, LOCAL, strategy.kept_keys), "drift": 0.4, LAST_ROUND: 0}
    strategy.client_update_start(1, new_global, local_state, ctx(1))
    assert local_state["fedema"]["mu"] == pytest.approx(0.8)


# -- the divergence: which tensors, which norm, from where -----------------------------------------

KERNELS = ("encoder.features.0.weight", "encoder.features.3.weight", "encoder.features.6.weight")


def shifted_kernels(state: dict, offsets=(0.1, 0.2, 0.3)) -> dict:
    """``state`` with cnn_small's three convolution kernels shifted by one offset each."""
    return {**state, **{k: state[k] + offset for k, offset in zip(KERNELS, offsets)}}


def kernel_norm(method, offsets=(0.1, 0.2, 0.3)) -> float:
    """The code's norm of ``shifted_kernels``: mean over the kernels of offset * sqrt(size)."""
    sizes = [method.state_dict()[k].numel() for k in KERNELS]
    return sum(o * math.sqrt(n) for o, n in zip(offsets, sizes)) / len(KERNELS)


def test_the_paper_divergence_is_the_codes_mean_of_per_kernel_norms():
    method = byol()
    strategy = create_strategy("fedu", threshold=0.4)
    strategy.setup(method)
    assert strategy.measured_keys == KERNELS
    global_state = filled(method, GLOBAL, strategy.shared_keys)
    kept = {**filled(method, GLOBAL, strategy.kept_keys),
            "projector.0.weight": filled(method, 5.0)["projector.0.weight"]}
    kept = shifted_kernels(kept)
    local_state = {LOCAL_MODEL: kept, LAST_ROUND: 0}
    strategy.client_update_start(0, global_state, local_state, ctx())
    # 0.1 * sqrt(32 * 1 * 9), 0.2 * sqrt(64 * 32 * 9), 0.3 * sqrt(128 * 64 * 9), averaged; the projector is no kernel
    expected = (0.1 * math.sqrt(288) + 0.2 * math.sqrt(18432) + 0.3 * math.sqrt(73728)) / 3
    assert local_state["fedu"]["divergence"] == pytest.approx(expected) == pytest.approx(kernel_norm(method))
    flat = create_strategy("fedu", divergence="paper_flat")
    flat.setup(method)
    assert flat.divergence(global_state, kept, {}) > 4 * expected   # the flattened norm is several times larger


def test_resnet18_divergence_averages_its_17_kernels_without_the_shortcuts():
    torch.manual_seed(0)
    method = create_method("byol", "resnet18_cifar", 8, 3, proj_hidden_dim=16, proj_output_dim=8)
    strategy = create_strategy("fedema")
    strategy.setup(method)
    assert len(strategy.measured_keys) == 17
    assert not [k for k in strategy.measured_keys if "downsample" in k]
    shapes = {k: v.shape for k, v in method.state_dict().items()}
    assert len([k for k in strategy.online_keys if len(shapes[k]) == 4]) == 20   # 3 shortcuts left out
    assert conv_kernel_keys(shapes, ["encoder.layer2.0.downsample.0.weight", "encoder.conv1.weight"]) == [
        "encoder.conv1.weight"]


def test_code_drift_is_measured_from_the_blended_start():
    """The origin of ``code``'s drift is the state local training starts from, after FedEMA's blend."""
    method = byol()
    strategy = create_strategy("fedema", divergence="code", scaler="constant", ema_lambda=2.0)
    strategy.setup(method)
    global_state = filled(method, GLOBAL, strategy.shared_keys)
    local_state = {LOCAL_MODEL: filled(method, LOCAL, strategy.kept_keys), "drift": 0.25, LAST_ROUND: 0}
    context = ctx()
    start = strategy.client_update_start(0, global_state, local_state, context)
    assert local_state["fedema"]["mu"] == pytest.approx(0.5)   # 2.0 * the stored drift 0.25
    torch.testing.assert_close(start[KERNELS[0]], torch.full_like(start[KERNELS[0]], 2.0))   # 0.5 * 3 + 0.5 * 1
    load_state_(method, shifted_kernels(dict(start)))   # local training moves the kernels by 0.1, 0.2, 0.3
    upload = strategy.client_upload(0, method, local_state, context)
    assert upload.extras["drift"] == pytest.approx(kernel_norm(method)) == pytest.approx(local_state["drift"])
    assert local_state[LAST_ROUND] == 1


def participate(strategy, method, local_state, round_index, global_value, trained_value):
    """One participation: the start from a global model filled with ``global_value``, then local training
    that leaves every shared and kept tensor at ``trained_value``; returns the start."""
    context = ctx(0, round_index)
    start = strategy.client_update_start(0, filled(method, global_value, strategy.shared_keys), local_state, context)
    load_state_(method, filled(method, trained_value))
    strategy.client_upload(0, method, local_state, context)
    return start


@pytest.mark.parametrize("skipped", ["restart", "blend"])
def test_fedema_mu_on_a_schedule_with_a_gap(skipped):
    """The client trains in rounds 0, 1 and 3. Round 1 follows round 0: mu = lambda * d, d = |3 - 1| * S with S
    the mean sqrt-size of the kernels. Round 3 follows a skipped round: ``restart`` starts from the global
    model (target included, mu = 0); ``blend`` blends the model of round 1, d = |2.5 - 1| * S."""
    method = byol()
    scale = sum(math.sqrt(method.state_dict()[k].numel()) for k in KERNELS) / len(KERNELS)
    strategy = create_strategy("fedema", scaler="constant", ema_lambda=0.2 / scale, skipped=skipped)
    strategy.setup(method)
    local_state: dict = {}
    participate(strategy, method, local_state, 0, GLOBAL, LOCAL)
    assert "fedema" not in local_state   # first participation: the global model
    start = participate(strategy, method, local_state, 1, GLOBAL, 2.5)
    assert local_state["fedema"]["mu"] == pytest.approx(0.4)   # 0.2 / S * 2 * S
    for key in KERNELS:
        torch.testing.assert_close(start[key], torch.full_like(start[key], 0.4 * LOCAL + 0.6 * GLOBAL))
    start = participate(strategy, method, local_state, 3, GLOBAL, 2.0)
    if skipped == "restart":
        assert local_state["fedema"] == {"divergence": None, "mu": 0.0, "restarted": True}
        assert values(start, method.part_keys("online") + method.part_keys("target")) == {GLOBAL}
    else:
        assert local_state["fedema"]["mu"] == pytest.approx(0.3)   # 0.2 / S * 1.5 * S
        assert values(start, method.part_keys("target")) == {2.5}


def test_fl_only_strategies_refuse_decl():
    for name in ("fedu", "fedema", "ldawa"):
        with pytest.raises(ValueError, match="runs in fl, not decl"):   # before any training
            DecLSimulator(byol(), tiny_clients(), create_strategy(name), np.full((3, 3), 1 / 3),
                          DecLConfig(rounds=1, batch_size=4))


# -- L-DAWA ------------------------------------------------------------------------------------

def ldawa_uploads():
    a = {"w": torch.tensor([1.0, 0.0]), "b": torch.tensor([2.0]), "n": torch.tensor(4)}
    b = {"w": torch.tensor([0.0, 2.0]), "b": torch.tensor([-1.0]), "n": torch.tensor(6)}
    return [Upload(0, 10, a), Upload(1, 30, b)], {"w": torch.tensor([1.0, 1.0]), "b": torch.tensor([1.0]),
                                                  "n": torch.tensor(0)}


def test_ldawa_layer_wise_by_hand():
    uploads, global_state = ldawa_uploads()
    strategy = create_strategy("ldawa")
    merged = strategy.aggregate(uploads, np.array([0.5, 0.5]), global_state)
    c = 1 / math.sqrt(2)  # cos([1,0],[1,1]) = cos([0,2],[1,1])
    torch.testing.assert_close(merged["w"], 0.5 * c * torch.tensor([1.0, 0.0]) + 0.5 * c * torch.tensor([0.0, 2.0]))
    # b: cos(2, 1) = 1 and cos(-1, 1) = -1, so 0.5 * 1 * 2 + 0.5 * (-1) * (-1)
    torch.testing.assert_close(merged["b"], torch.tensor([0.5 * 2.0 + 0.5 * 1.0]))
    assert merged["n"].item() == 5  # integer counters: plain average


def test_ldawa_model_level_and_warmup_by_hand():
    uploads, global_state = ldawa_uploads()
    merged = create_strategy("ldawa", granularity="model").aggregate(uploads, np.array([0.5, 0.5]), global_state)
    ca = 1 * 1 + 2 * 1  # <[1,0,2],[1,1,1]>
    cb = 2 * 1 - 1 * 1  # <[0,2,-1],[1,1,1]>
    da, db = ca / (math.sqrt(5) * math.sqrt(3)), cb / (math.sqrt(5) * math.sqrt(3))
    torch.testing.assert_close(merged["w"], torch.tensor([0.5 * da, 0.5 * db * 2]), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(merged["b"], torch.tensor([0.5 * da * 2 - 0.5 * db]), rtol=1e-6, atol=1e-6)
    warm = create_strategy("ldawa", warmup_rounds=1)
    plain = warm.aggregate(uploads, np.array([0.25, 0.75]), global_state)
    torch.testing.assert_close(plain["w"], torch.tensor([0.25, 1.5]))
    warm.server_step([global_state], uploads, 0)
    assert not torch.allclose(warm.aggregate(uploads, np.array([0.25, 0.75]), global_state)["w"], plain["w"])
    assert warm.state_dict() == {"rounds_aggregated": 1}


def test_ldawa_caps_the_cosine_at_one_and_runs_in_fl():
    uploads, global_state = ldawa_uploads()
    same = [Upload(0, 1, dict(global_state)), Upload(1, 1, dict(global_state))]
    merged = create_strategy("ldawa").aggregate(same, np.array([0.5, 0.5]), global_state)
    torch.testing.assert_close(merged["w"], global_state["w"])
    _, result = fl_run(create_strategy("ldawa", granularity="model"), rounds=2)
    assert all(np.isfinite(r["loss"]) for r in result.metrics)

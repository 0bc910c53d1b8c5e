"""Training-step options (bf16 autocast, channels-last, torch.compile) against the plain fp32 step.

Tiny models on CPU, one thread, batch 8 of 16 px single-channel images. The method is BYOL: its loss
(about 4 at initialisation) is far from zero, so a relative tolerance means something (SimSiam's
starts near 0), and its EMA target exercises ``after_optimizer_step``.

Tolerances, each against the plain step from the same initial weights, batches and views:
- bf16: first-step loss within 5e-2 relative (bf16 keeps 8 mantissa bits; measured <= 3e-3);
- channels_last: losses of 3 consecutive steps within 1e-5 absolute (measured <= 3e-6);
- compile: losses of 3 consecutive steps within 1e-4 absolute (measured <= 1e-6). Compiling takes
  25-50 s per model on 2 cores, so these tests are marked slow.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch

from dssl.config.methods import METHOD_SPECS
from dssl.data.imageset import ArrayImageSet
from dssl.federation import ClientData, DecLConfig, FLConfig, FLSimulator, create_strategy
from dssl.federation.local import (
    CompileError,
    OptimizerConfig,
    StepOptions,
    TrainStep,
    build_optimizer,
    train_client,
)
from dssl.methods import create_method
from dssl.training.determinism import configure_determinism

SMALL_BACKBONES = ("cnn_small", "vit_small")
BATCH, SIZE, STEPS = 8, 16, 3
BF16_RTOL, CHANNELS_LAST_ATOL, COMPILE_ATOL = 5e-2, 1e-5, 1e-4


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _method(backbone: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_method("byol", backbone, SIZE, 1).train()


def _losses(backbone: str, options: StepOptions, steps: int = STEPS) -> list[float]:
    """Loss of each of ``steps`` steps from the same weights, batches and view seeds."""
    method = _method(backbone)
    config = OptimizerConfig()
    step = TrainStep(method, build_optimizer(method, config, config.lr(BATCH)), options)
    batches = torch.Generator().manual_seed(3)
    losses = []
    for index in range(steps):
        images = torch.rand(BATCH, 1, SIZE, SIZE, generator=batches)
        views = torch.Generator().manual_seed(index)
        out = step(images, lambda x: method.training_loss(x, generator=views))
        losses.append(float(out["loss"].detach()))
    return losses


@pytest.mark.parametrize("backbone", SMALL_BACKBONES)
def test_bf16_first_step_loss_matches_fp32(backbone):
    plain = _losses(backbone, StepOptions(), steps=1)
    bf16 = _losses(backbone, StepOptions(precision="bf16"), steps=1)
    assert bf16 == pytest.approx(plain, rel=BF16_RTOL)


@pytest.mark.parametrize("backbone", SMALL_BACKBONES)
def test_channels_last_matches_plain(backbone):
    plain = _losses(backbone, StepOptions())
    assert _losses(backbone, StepOptions(channels_last=True)) == pytest.approx(plain, abs=CHANNELS_LAST_ATOL)


def test_channels_last_converts_conv_weights_and_inputs():
    torch.manual_seed(0)
    method = create_method("byol", "cnn_small", SIZE, 3).train()  # 3 channels: 1 is both layouts at once
    step = TrainStep(method, build_optimizer(method, OptimizerConfig(), 0.01), StepOptions(channels_last=True))
    conv = next(p for p in method.parameters() if p.ndim == 4)
    assert conv.is_contiguous(memory_format=torch.channels_last)
    images = torch.rand(BATCH, 3, SIZE, SIZE)
    assert not images.is_contiguous(memory_format=torch.channels_last)
    seen = []

    def loss(x: torch.Tensor):
        seen.append(x.is_contiguous(memory_format=torch.channels_last))
        return method.training_loss(x)

    step(images, loss)
    assert seen == [True]


@pytest.mark.slow
@pytest.mark.parametrize("backbone", SMALL_BACKBONES)
def test_compile_matches_plain(backbone):
    plain = _losses(backbone, StepOptions())
    assert _losses(backbone, StepOptions(compile=True)) == pytest.approx(plain, abs=COMPILE_ATOL)


def test_compile_targets_keep_state_dict_keys():
    method = _method("vit_small")
    keys = list(method.state_dict())
    step = TrainStep(method, build_optimizer(method, OptimizerConfig(), 0.01), StepOptions(compile=True))
    assert list(method.state_dict()) == keys  # compiled in place: snapshots and checkpoints unchanged
    # Each transformer block on its own: MAE bypasses the ViT's forward, not its blocks.
    assert all(block in step.compiled for block in method.encoder.blocks)
    assert method.projector in step.compiled


def test_missing_cpp_compiler_is_a_clear_error():
    import torch._inductor.config as inductor_config

    method = _method("cnn_small")
    with inductor_config.patch({"cpp.cxx": ("/nonexistent/g++",)}):
        with pytest.raises(CompileError, match="C\\+\\+ compiler.*compile: false"):
            TrainStep(method, build_optimizer(method, OptimizerConfig(), 0.01), StepOptions(compile=True))


def test_compile_failure_during_a_step_is_not_swallowed():
    from torch._dynamo.exc import TorchDynamoException

    method = _method("cnn_small")
    step = TrainStep(method, build_optimizer(method, OptimizerConfig(), 0.01), StepOptions(compile=True))

    def failing(images: torch.Tensor):
        raise TorchDynamoException("backend exploded")

    with pytest.raises(CompileError, match="backend exploded") as info:
        step(torch.rand(BATCH, 1, SIZE, SIZE), failing)
    assert isinstance(info.value.__cause__, TorchDynamoException)
    with pytest.raises(ZeroDivisionError):  # errors of the model itself pass through unchanged
        step(torch.rand(BATCH, 1, SIZE, SIZE), lambda images: 1 / 0)


def test_options_from_params_mappings_and_validation():
    config = FLConfig.from_dict({"rounds": 2, "precision": "bf16", "channels_last": True, "compile": True})
    assert config.step_options() == StepOptions("bf16", channels_last=True, compile=True)
    assert DecLConfig.from_dict({"rounds": 2, "precision": "bf16"}).step_options().precision == "bf16"
    with pytest.raises(ValueError, match="precision"):
        FLConfig(rounds=1, precision="fp16").validate()


def _clients(count: int = 2, per_client: int = 20) -> list[ClientData]:
    num = count * per_client
    images = ArrayImageSet(np.random.default_rng(0).integers(0, 256, (num, SIZE, SIZE, 1), dtype=np.uint8),
                           np.zeros(num, dtype=np.int64), 10)
    return [ClientData(images, np.arange(i * per_client, (i + 1) * per_client)) for i in range(count)]


def test_simulator_takes_the_options_from_its_config():
    def run(**options) -> FLSimulator:
        config = FLConfig.from_dict({"rounds": 1, "clients_per_round": 2, "batch_size": BATCH, **options})
        simulator = FLSimulator(_method("cnn_small"), _clients(), create_strategy("fedavg"), config)
        simulator.result = simulator.run()
        return simulator

    plain = run()
    fast = run(precision="bf16", channels_last=True)
    assert fast.train_step.options == StepOptions("bf16", channels_last=True)
    assert fast.fingerprint != plain.fingerprint  # never resumes a plain run's checkpoint
    assert fast.result.metrics[0]["loss"] == pytest.approx(plain.result.metrics[0]["loss"], rel=BF16_RTOL)


def test_defaults_build_the_plain_step():
    config = FLConfig(rounds=1)
    assert config.step_options() == StepOptions() and config.step_options().plain
    # The checkpoint fingerprint of a default run is what it was before the options existed.
    assert not {"precision", "channels_last", "compile"} & set(config.identity())
    assert FLConfig(rounds=1, precision="bf16").identity()["precision"] == "bf16"

    method = _method("cnn_small")
    simulator = FLSimulator(method, _clients(), create_strategy("fedavg"),
                            FLConfig(rounds=1, clients_per_round=1, batch_size=BATCH))
    step = simulator.train_step
    assert step.plain and step.compiled == []
    assert all(p.is_contiguous() for p in method.parameters())
    assert all(getattr(m, "_compiled_call_impl", None) is None for m in method.modules())


def test_plain_step_is_the_original_loop_bit_for_bit():
    """train_client with the default step == the hand-written fp32 loop it replaced."""
    images = ArrayImageSet(np.random.default_rng(1).integers(0, 256, (24, SIZE, SIZE, 1), dtype=np.uint8),
                           np.zeros(24, dtype=np.int64), 10)
    data = ClientData(images, np.arange(24))
    config = OptimizerConfig()

    method = _method("cnn_small")
    optimizer = build_optimizer(method, config, config.lr(BATCH))
    views = torch.Generator().manual_seed(5)
    train_client(method, optimizer, data, lambda x: method.training_loss(x, generator=views), epochs=1,
                 batch_size=BATCH, drop_last=True, shuffle_generator=torch.Generator().manual_seed(4),
                 augment_generator=torch.Generator(), device=torch.device("cpu"))
    stepped = {k: v.clone() for k, v in method.state_dict().items()}

    reference = _method("cnn_small")
    optimizer = build_optimizer(reference, config, config.lr(BATCH))
    views = torch.Generator().manual_seed(5)
    order = data.indices[torch.randperm(24, generator=torch.Generator().manual_seed(4)).numpy()]
    for start in range(0, 24, BATCH):
        batch = images.get_batch(order[start:start + BATCH]).float().div_(255.0)
        out = reference.training_loss(batch, generator=views)
        optimizer.zero_grad(set_to_none=True)
        out["loss"].backward()
        optimizer.step()
        reference.after_optimizer_step()
    assert all(torch.equal(stepped[k], v) for k, v in reference.state_dict().items())


@pytest.mark.parametrize("name", METHOD_SPECS.names())
def test_every_method_steps_under_bf16_with_deterministic_kernels(name):
    """As the pipeline runs: deterministic kernels (strict) and bf16 autocast. Torch's deterministic
    index_put wants matching dtypes, so a method writing bf16 activations into fp32 memory (MoCo's queue)
    must cast them; its memory keeps its own dtype."""
    torch.manual_seed(0)
    method = create_method(name, "vit_small" if name == "mae" else "cnn_small", SIZE, 1).train()
    memory = {key: value.dtype for key, value in method.state_dict().items()}
    config = OptimizerConfig()
    step = TrainStep(method, build_optimizer(method, config, config.lr(BATCH)), StepOptions(precision="bf16"))
    configure_determinism(True)
    try:
        out = step(torch.rand(BATCH, 1, SIZE, SIZE), method.training_loss)
    finally:
        configure_determinism(False)
    assert torch.isfinite(out["loss"].detach()).all()
    assert {key: value.dtype for key, value in method.state_dict().items()} == memory

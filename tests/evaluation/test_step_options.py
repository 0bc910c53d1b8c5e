"""Step options in evaluation: bf16 autocast and channels-last reach the fine-tuning step and the
frozen-encoder passes of every protocol; bad values are refused one problem per key, by the config and
by the params validator."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from evaluation_helpers import separable_images

from dssl.config.checker import ParamsError
from dssl.config.params import load_params, read_params
from dssl.data.imageset import ArrayImageSet
from dssl.config.protocols import PROTOCOL_SPECS
from dssl.evaluation import evaluate
from dssl.models.backbones import create_backbone

pytestmark = pytest.mark.usefixtures("single_thread")


def _rgb(images):
    """The same images on 3 channels (with one channel a contiguous batch is channels-last as well)."""
    return ArrayImageSet(np.repeat(images._images.transpose(0, 2, 3, 1), 3, axis=-1), images.labels, images.num_classes)


def _recording_encoder():
    """A CNN that records the dtype of its first conv's output and the memory format of its input."""
    torch.manual_seed(0)
    encoder = create_backbone("cnn_small", 8, 3)
    seen = []
    conv = next(m for m in encoder.modules() if isinstance(m, torch.nn.Conv2d))
    conv.register_forward_hook(lambda module, inputs, output: seen.append(
        (output.dtype, inputs[0].is_contiguous(memory_format=torch.channels_last))))
    return encoder, seen


@pytest.mark.parametrize("protocol, config", [
    ("finetune", {"epochs": 1, "lr_grid": [1e-3], "batch_size": 16}),
    ("linear_probe", {"epochs": 2, "lr_grid": [1e-2], "weight_decay_grid": [0.0]}),
    ("knn", {"k": 3}),
])
def test_bf16_and_channels_last_reach_every_pass(protocol, config):
    train, test = _rgb(separable_images(48, seed=0, size=8)), _rgb(separable_images(12, seed=1, size=8))
    encoder, seen = _recording_encoder()
    plain = evaluate(protocol, copy.deepcopy(encoder), train, test, config, seed=0)
    assert seen == [] or all(dtype == torch.float32 and not channels_last for dtype, channels_last in seen)
    seen.clear()
    fast = evaluate(protocol, encoder, train, test, {**config, "precision": "bf16", "channels_last": True}, seed=0)
    assert seen and all(dtype == torch.bfloat16 and channels_last for dtype, channels_last in seen)
    assert abs(fast["test_acc"] - plain["test_acc"]) <= 0.25   # same model, coarser arithmetic


def test_a_bad_step_value_is_refused_by_the_config():
    with pytest.raises(ValueError, match=r"device: unknown device 'gpu'; one of: auto, cpu, cuda; "
                                         r"precision: unknown precision 'fp16'; one of: fp32, bf16"):
        PROTOCOL_SPECS["finetune"].make_config({"precision": "fp16", "device": "gpu"})


def test_the_validator_names_every_bad_step_value_once(tmp_path):
    params = read_params("configs/ci.yaml")
    params["pretrain"]["fl"]["train"].update(precision="fp16", compile="yes")
    params["pretrain"]["central"]["train"]["device"] = "tpu"
    params["strategies"]["fedavg"]["train"] = {"channels_last": 1}
    params["evaluate"]["finetune"].update(device="gpu", per_dataset={"digits": {"precision": "half"}},
                                          per_family={"vit": {"epochs": 2}, "rnn": {}})
    path = tmp_path / "params.yaml"
    import yaml

    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ParamsError) as err:
        load_params(path)
    problems = [(p.path, p.message) for p in err.value.problems]
    expected = {"pretrain.fl.train.precision", "pretrain.fl.train.compile", "pretrain.central.train.device",
                "strategies.fedavg.train.channels_last", "evaluate.finetune.device",
                "evaluate.finetune.per_dataset.digits.precision", "evaluate.finetune.per_family.rnn"}
    assert expected <= {path for path, _ in problems}
    for key in expected:
        assert sum(path == key for path, _ in problems) == 1, key
    assert any("unknown precision 'fp16'" in m for _, m in problems)
    assert any("'rnn' is not a backbone family" in m for _, m in problems)


def test_an_override_value_is_checked_in_its_resolved_config(tmp_path):
    import yaml

    params = read_params("configs/ci.yaml")
    params["evaluate"]["finetune"]["per_family"] = {"cnn": {"layer_decay": 1.5}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ParamsError) as raised:
        load_params(path)
    assert [str(p) for p in raised.value.problems if "layer_decay" in str(p)] == [
        "evaluate.finetune.per_family.cnn.layer_decay: must be <= 1, got 1.5  (hint: layer_decay: (0, 1])"]

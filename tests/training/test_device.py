"""The device a stage asks for: auto falls back to the CPU, cpu is the CPU, cuda is a GPU or one error."""

from __future__ import annotations

import pytest
import torch

from dssl.pipeline.common import StageError
from dssl.pipeline.workers import stage_device
from dssl.training.device import DeviceError, resolve_device

no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is there")


def test_auto_and_cpu(monkeypatch):
    monkeypatch.delenv("DSSL_DEVICE", raising=False)
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("DSSL_DEVICE", "cpu")
    assert resolve_device("auto") == torch.device("cpu")


@no_gpu
def test_cuda_without_a_gpu_is_one_error_naming_the_key_and_the_fixes(monkeypatch):
    monkeypatch.setenv("DSSL_DEVICE", "cpu")   # never turns a cuda request into the CPU
    with pytest.raises(DeviceError) as err:
        resolve_device("cuda", "evaluate.finetune.device")
    message = str(err.value)
    assert message.startswith("evaluate.finetune.device is 'cuda' but torch finds no GPU (torch ")
    assert "set evaluate.finetune.device: auto" in message and "GPU node" in message


def test_an_unknown_device_and_a_stage_split_over_two_devices_are_refused():
    with pytest.raises(DeviceError, match="unknown device 'gpu'; one of: auto, cpu, cuda"):
        resolve_device("gpu", "x.device")
    if torch.cuda.is_available():
        with pytest.raises(StageError, match="one stage runs on one device"):
            stage_device({"a.device": "cpu", "b.device": "cuda"})
    assert stage_device({"a.device": "cpu", "b.device": "cpu"}) == torch.device("cpu")
    assert stage_device({}) == resolve_device("auto")


@no_gpu
def test_a_stage_request_for_cuda_is_a_stage_error():
    with pytest.raises(StageError, match=r"^pretrain.fl.train.device is 'cuda' but torch finds no GPU"):
        stage_device({"pretrain.fl.train.device": "cuda"})

"""Fig. 3 and Table 5 read stand-alone clients' encoders; a missing one that ``pretrain.local.clients`` does not
train is named in the error (the fix is in params.yaml, not a stage to run), and no client is named when the
partition lists none (every client then trains)."""

from __future__ import annotations

import copy

import pytest

from dssl.artifacts import ArtifactError
from dssl.config.params import read_params
from dssl.pipeline.features import encoder_files
from dssl.pipeline.weight_distance import _local_encoder_files

from conftest import REPO

HINT = "not among pretrain.local.clients.fl-label"


@pytest.fixture(scope="module")
def params() -> dict:
    params = read_params(REPO / "params.yaml")
    assert params["pretrain"]["local"]["clients"]["fl-label"] == [0, 9]
    return params


def test_a_client_the_partition_does_not_train_is_named(params: dict, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ArtifactError, match=rf"clients \[5\] are {HINT}"):
        encoder_files(params, "mae-vit", "fl-label", "fedmar", [0, 5], seed=0)
    with pytest.raises(ArtifactError, match=rf"clients \[5\] are {HINT}"):
        _local_encoder_files(params, "mae-vit", "fl-label", [0, 5], [0])


def test_no_client_is_named_when_the_partition_lists_none_or_all_are_listed(params: dict, tmp_path,
                                                                           monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    every = copy.deepcopy(params)
    del every["pretrain"]["local"]["clients"]
    for chosen, clients in ((every, [0, 5]), (params, [0, 9])):
        for read in (lambda: encoder_files(chosen, "mae-vit", "fl-label", "fedmar", clients, seed=0),
                     lambda: _local_encoder_files(chosen, "mae-vit", "fl-label", clients, [0])):
            with pytest.raises(ArtifactError) as missing:
                read()
            assert "pretrain.local.clients" not in str(missing.value)

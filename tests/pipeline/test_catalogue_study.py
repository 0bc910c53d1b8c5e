"""The catalogue's pretraining grids are the Study's cells, and an edit of the params dict between two listings
is seen by the second."""

from __future__ import annotations

import copy

import pytest

from dssl.config.params import read_params
from dssl.config.study import Study
from dssl.pipeline.catalogue import instances, used_components

from conftest import REPO

PRETRAINING = {"pretrain_fl": "fl", "pretrain_decl": "decl", "pretrain_local": "local", "pretrain_central": "central"}


@pytest.fixture(scope="module")
def params() -> dict:
    return read_params(REPO / "params.yaml")


def test_each_pretraining_stage_is_a_study_cell_with_its_model_and_seeds(params: dict) -> None:
    study = Study.from_params(params)
    for kind, framework in PRETRAINING.items():
        stages = [s.fields for s in instances(params) if s.kind.name == kind]
        cells = study.cells(framework)
        assert stages and len(stages) == len(cells)
        for fields, cell in zip(stages, cells):
            model = study.models[cell.model]
            assert (fields["model"], fields.get("partition" if framework != "decl" else "graph"),
                    fields.get("strategy"), fields["seeds_key"]) == (cell.model, cell.place, cell.strategy,
                                                                     cell.seeds_key)
            assert (fields["family"], fields["method"], fields["backbone"]) == (model.family, model.method,
                                                                                model.backbone)


def test_a_listing_sees_an_edit_of_the_params_dict(params: dict) -> None:
    edited = copy.deepcopy(params)
    instances(edited)
    edited["models"]["mae-vit"]["backbone"] = "tiny_vit"
    trained = [s.fields for s in instances(edited) if s.kind.name in PRETRAINING and s.fields["model"] == "mae-vit"]
    assert trained and {fields["backbone"] for fields in trained} == {"tiny_vit"}
    assert "backbone/tiny_vit" in used_components(edited)

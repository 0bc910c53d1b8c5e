"""A grid's own seeds: which cells run them, how they are validated, which stages read them, what the plan
counts. The default gives Table 1's SimSiam + CNN ten seeds (pretrain.fl.grids.table1-simsiam), paper B four
(pretrain.fl.grids.paper-b-methods and the grids that alias its list), paper B's FedBYOL and Table 7's A-MMD
cells eight (pretrain.fl.grids.paper-b-byol, table7-ammd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dssl.config.grids import cell_seeds, reference_seeds, seeds_key, shared_seeds
from dssl.config.params import read_params, validate
from dssl.pipeline.catalogue import instances

REPO = Path(__file__).resolve().parents[2]
TEN = "pretrain.fl.grids.table1-simsiam.seeds"
FEDBYOL = "pretrain.fl.grids.paper-b-byol.seeds"
PAPER_B = "pretrain.fl.grids.paper-b-methods.seeds"
SIMSIAM_120 = ("simsiam-cnn", "fl-label", "fedavg-r120")


@pytest.fixture
def good() -> dict:
    return read_params(REPO / "params.yaml")


def problems_of(params: dict) -> dict[str, str]:
    return {p.path: p.message for p in validate(params, REPO)}


def test_a_grid_with_its_own_seeds_gives_them_to_its_cells_only(good: dict) -> None:
    assert good["pretrain"]["fl"]["grids"]["table1-simsiam"]["seeds"] == list(range(10))
    assert seeds_key(good, "fl", SIMSIAM_120) == TEN
    assert cell_seeds(good, "fl", SIMSIAM_120) == list(range(10))
    assert cell_seeds(good, "fl", ("byol-cnn", "fl-label", "t2-fedema")) == [0, 1, 2]   # Table 2: the default
    assert seeds_key(good, "fl", ("byol-cnn", "fl-2class", "fedssl")) == FEDBYOL
    assert cell_seeds(good, "fl", ("byol-cnn", "fl-2class", "fedssl")) == list(range(8))
    assert seeds_key(good, "fl", ("simclr-cnn", "fl-2class", "fedssl")) == PAPER_B
    assert cell_seeds(good, "fl", ("byol-cnn", "fl-2class", "fedema")) == [0, 1, 2, 3]
    assert cell_seeds(good, "local", ("byol-cnn", "fl-2class")) == [0, 1, 2, 3]
    assert cell_seeds(good, "decl", ("mae-vit", "general-5", "decl-mh")) == [0, 1, 2]   # Table 6: the default
    assert seeds_key(good, "fl", ("mae-cnn", "fl-label", "fedavg")) == "seeds"
    assert cell_seeds(good, "fl", ("simsiam-cnn", "fl-label", "fedavg")) == good["seeds"] == [0, 1, 2]
    assert cell_seeds(good, "local", ("simsiam-cnn", "fl-label")) == [0, 1, 2]
    assert seeds_key(good, "central", ("simsiam-cnn",)) == "seeds"


def test_the_random_init_reference_runs_every_seed_of_its_backbones_cells(good: dict) -> None:
    assert reference_seeds(good, "cnn_small") == list(range(10))
    assert reference_seeds(good, "vit_small") == list(range(8))   # A-MMD's cells (Tables 7, 8) run 8


def test_the_weight_distance_pairs_on_the_seeds_both_cells_train(good: dict) -> None:
    good["pretrain"]["local"]["grids"]["table5"]["seeds"] = [1, 2, 7]
    assert shared_seeds(good, ("simsiam-cnn", "fl-label", "fedavg")) == [1, 2]
    good["pretrain"]["local"]["grids"]["table5"]["seeds"] = [7]
    assert "share no seed" in problems_of(good)["weight_distance"]


def test_each_stage_depends_on_the_key_that_declares_its_seeds(good: dict) -> None:
    """DVC reruns exactly the cells whose seed list changed: a cell's stages name its grid's key, the
    random-init reference every key a cell of a backbone it serves reads."""
    stages = {stage.name: stage for stage in instances(good)}
    for kind in ("pretrain_fl", "evaluate_fl"):
        own = stages[f"{kind}@simsiam-cnn-fl-label-fedavg-r120"].params_keys
        assert TEN in own and "seeds" not in own
        assert "seeds" in stages[f"{kind}@mae-cnn-fl-label-fedavg"].params_keys
    assert {"seeds", TEN} <= set(stages["evaluate_random@cnn_small"].params_keys)
    assert "seeds" in stages["weight_distance@simsiam-cnn-fl-label-fedavg"].params_keys


def test_grid_seeds_are_checked_and_a_shared_cell_runs_one_list(good: dict) -> None:
    grids = good["pretrain"]["fl"]["grids"]
    grids["table1-simsiam"]["seeds"] = [0, 0, -1]
    problems = problems_of(good)
    assert problems[TEN] == "holds a seed twice"
    assert problems[f"{TEN}[2]"] == "must be an integer >= 0, got -1"
    grids["table1-simsiam"]["seeds"] = [0, 1, 2, 3, 4]
    grids["again"] = {"models": ["simsiam-cnn"], "partitions": ["fl-label"], "strategies": ["fedavg-r120"]}
    message = problems_of(good)["seeds"]   # reported at the key that differs from the first grid's
    assert message == (f"cell simsiam-cnn / fl-label / fedavg-r120 is in grids with different seeds ({TEN}: "
                       "[0, 1, 2, 3, 4]; seeds: [0, 1, 2])")
    grids["again"]["seeds"] = [4, 3, 2, 1, 0]   # the same list in another order is the same seeds
    assert problems_of(good) == {}


def test_fig3_shows_a_seed_that_its_cells_train(good: dict) -> None:
    good["features"]["seed"] = 3
    assert problems_of(good)["features.seed"] == ("3 is not one of the seeds [0, 1, 2] that "
                                                  "simsiam-cnn / fl-label / fedavg trains")
    good["features"]["seed"] = 0
    assert problems_of(good) == {}


def test_the_plan_counts_each_cell_s_own_seeds(good: dict) -> None:
    """On the IID split every client takes the same steps a round, so a 120-round cell of 10 seeds trains
    exactly 1200/180 the images of a 60-round cell of 3."""
    from dssl.planning.workload import Workload

    workload = Workload(good, REPO)
    costs = {stage.name: workload.stage(stage) for stage in instances(good)
             if stage.name in ("pretrain_fl@simsiam-cnn-fl-iid-fedavg-r120", "pretrain_fl@mae-cnn-fl-iid-fedavg",
                               "evaluate_random@cnn_small", "evaluate_random@vit_small")}
    long, short = costs["pretrain_fl@simsiam-cnn-fl-iid-fedavg-r120"], costs["pretrain_fl@mae-cnn-fl-iid-fedavg"]
    assert long.images_trained * 180 == short.images_trained * 1200
    cnn, vit = costs["evaluate_random@cnn_small"], costs["evaluate_random@vit_small"]
    assert cnn.images_forward * 8 == vit.images_forward * 10   # same protocols and data, 10 seeds against 8

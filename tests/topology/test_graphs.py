"""Graphs: seeded, connected, hitting the target |A| (self included); impossible requests fail."""

from __future__ import annotations

import numpy as np
import pytest

from dssl.topology.graphs import GraphError, algebraic_connectivity, create_graph, load_graph, save_graph, spectral_gap
from dssl.topology.mixing import mixing_matrix


@pytest.mark.parametrize("connectivity", [3, 5, 10])
def test_uniform_graph_is_regular_and_connected(connectivity: int) -> None:
    graph = create_graph({"topology": "uniform", "connectivity": connectivity}, 20, seed=0)
    sizes = graph.closed_neighbourhood_sizes()
    assert (sizes == connectivity).all()
    assert algebraic_connectivity(graph.adjacency) > 1e-9  # connected
    assert not graph.adjacency.diagonal().any()
    assert (graph.adjacency == graph.adjacency.T).all()


@pytest.mark.parametrize("connectivity", [3, 5, 10, 4.3])
def test_general_graph_hits_target_within_one_over_n(connectivity: float) -> None:
    graph = create_graph({"topology": "general", "connectivity": connectivity}, 20, seed=1)
    sizes = graph.closed_neighbourhood_sizes()
    assert abs(sizes.mean() - connectivity) <= 1 / 20 + 1e-12
    assert algebraic_connectivity(graph.adjacency) > 1e-9


def test_general_graph_degrees_vary() -> None:
    graph = create_graph({"topology": "general", "connectivity": 5}, 20, seed=0)
    assert graph.closed_neighbourhood_sizes().std() > 0


def test_complete_graph() -> None:
    graph = create_graph({"topology": "complete"}, 7, seed=0)
    assert (graph.closed_neighbourhood_sizes() == 7).all()


def test_same_seed_same_graph_other_seed_differs() -> None:
    spec = {"topology": "general", "connectivity": 5}
    a, b, c = (create_graph(spec, 20, s) for s in (3, 3, 4))
    assert (a.adjacency == b.adjacency).all()
    assert (a.adjacency != c.adjacency).any()


@pytest.mark.parametrize(
    "spec, clients, message",
    [
        ({"topology": "uniform", "connectivity": 21}, 20, "outside 2..N"),
        ({"topology": "uniform", "connectivity": 4}, 19, "no regular graph of degree 3 on 19"),
        ({"topology": "uniform", "connectivity": 2}, 10, "perfect matching"),
        ({"topology": "general", "connectivity": 2.5}, 20, "needs connectivity >= 2.90"),
        ({"topology": "uniform", "connectivity": 3.5}, 20, "integer connectivity"),
    ],
)
def test_impossible_requests(spec: dict, clients: int, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        create_graph(spec, clients, seed=0)


def test_mixing_rules_on_a_path_graph() -> None:
    # path 0 - 1 - 2: degrees 1, 2, 1
    adjacency = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=bool)
    uniform = mixing_matrix(adjacency, "uniform")
    np.testing.assert_allclose(uniform, [[1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1 / 2, 1 / 2]])
    mh = mixing_matrix(adjacency, "metropolis_hastings")
    np.testing.assert_allclose(mh, [[2 / 3, 1 / 3, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1 / 3, 2 / 3]])
    sized = mixing_matrix(adjacency, "data_size", np.array([10, 30, 60]))
    np.testing.assert_allclose(sized, [[10 / 40, 30 / 40, 0], [0.1, 0.3, 0.6], [0, 1 / 3, 2 / 3]])
    degree = mixing_matrix(adjacency, "degree_normalised")  # rows of 1/|A_j| over A_i, normalised
    np.testing.assert_allclose(degree, [[0.6, 0.4, 0], [3 / 8, 1 / 4, 3 / 8], [0, 0.4, 0.6]])
    push = mixing_matrix(adjacency, "push_sum")  # column j: 1/|A_j| to each member of A_j
    np.testing.assert_allclose(push, [[1 / 2, 1 / 3, 0], [1 / 2, 1 / 3, 1 / 2], [0, 1 / 3, 1 / 2]])


def test_push_sum_on_a_directed_cycle() -> None:
    # 0 -> 1 -> 2 -> 0: each client keeps half its mass and sends half to its one successor
    adjacency = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=bool)
    push = mixing_matrix(adjacency, "push_sum")
    np.testing.assert_allclose(push, [[1 / 2, 0, 1 / 2], [1 / 2, 1 / 2, 0], [0, 1 / 2, 1 / 2]])


def test_push_sum_is_column_stochastic_on_the_graph() -> None:
    graph = create_graph({"topology": "general", "connectivity": 5}, 20, seed=0)
    matrix = mixing_matrix(graph.adjacency, "push_sum")
    np.testing.assert_allclose(matrix.sum(axis=0), 1.0)
    assert not np.allclose(matrix.sum(axis=1), 1.0)  # degrees vary: not row-stochastic
    np.testing.assert_array_equal(matrix > 0, graph.adjacency | np.eye(20, dtype=bool))


@pytest.mark.parametrize("rule", ["uniform", "data_size", "degree_normalised", "metropolis_hastings"])
def test_mixing_is_row_stochastic_on_the_graph(rule: str) -> None:
    graph = create_graph({"topology": "general", "connectivity": 5}, 20, seed=0)
    matrix = mixing_matrix(graph.adjacency, rule, np.arange(1, 21))
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0)
    off_graph = ~(graph.adjacency | np.eye(20, dtype=bool))
    assert (matrix[off_graph] == 0).all()
    assert 0 < spectral_gap(matrix) <= 1


def test_metropolis_hastings_is_doubly_stochastic() -> None:
    graph = create_graph({"topology": "general", "connectivity": 4}, 20, seed=2)
    matrix = mixing_matrix(graph.adjacency, "metropolis_hastings")
    np.testing.assert_allclose(matrix, matrix.T)
    np.testing.assert_allclose(matrix.sum(axis=0), 1.0)


def test_save_and_load_round_trip(tmp_path) -> None:
    graph = create_graph({"topology": "uniform", "connectivity": 5}, 20, seed=0)
    mixings = {"uniform": mixing_matrix(graph.adjacency, "uniform")}
    stats = save_graph(graph, mixings, tmp_path / "g.json")
    loaded, loaded_mix = load_graph(tmp_path / "g.json")
    assert (loaded.adjacency == graph.adjacency).all()
    np.testing.assert_allclose(loaded_mix["uniform"], mixings["uniform"])
    assert stats["connectivity_mean"] == 5.0
    first = (tmp_path / "g.json").read_bytes()
    save_graph(graph, mixings, tmp_path / "g.json")
    assert (tmp_path / "g.json").read_bytes() == first


def test_distance_to_uniform_by_hand_on_a_path_and_zero_on_a_regular_graph() -> None:
    from dssl.config.mixing import MIXING_SPECS
    from dssl.topology.mixing import distance_to_uniform, mixing_matrix

    path = np.zeros((3, 3), dtype=bool)
    path[0, 1] = path[1, 0] = path[1, 2] = path[2, 1] = True   # |A_i| = 2, 3, 2
    distance = {rule: distance_to_uniform(mixing_matrix(path, rule, np.array([10, 10, 10])), path)
                for rule in MIXING_SPECS.names()}
    # Metropolis-Hastings row 0: (2/3, 1/3, 0) against (1/2, 1/2, 0); degree-normalised row 0: (3/5, 2/5, 0);
    # push-sum column 1 gives client 1 the weights (1/2, 1/3, 1/2); equal sizes make data-size mixing uniform
    assert distance == pytest.approx({"uniform": 0.0, "data_size": 0.0, "metropolis_hastings": 1 / 6,
                                      "degree_normalised": 0.1, "push_sum": 1 / 6})
    ring = np.roll(np.eye(6, dtype=bool), 1, axis=1) | np.roll(np.eye(6, dtype=bool), -1, axis=1)
    for rule in ("degree_normalised", "metropolis_hastings", "push_sum"):
        assert distance_to_uniform(mixing_matrix(ring, rule), ring) < 1e-15

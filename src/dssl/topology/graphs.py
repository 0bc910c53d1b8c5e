"""Communication graphs for decentralized learning (paper A, Section 5 and Fig. 2a).

Paper A counts the *closed* neighbourhood: |A_i| = 1 + deg(i), so 2 <= |A_i| <= N, and the average
connectivity is |A| = mean_i |A_i|. Federated learning equals the complete graph (|A_i| = N).

Topologies (declared in ``dssl.topology.topology_specs``, registry ``TOPOLOGY_SPECS``, re-exported here as
``TOPOLOGIES``; keyed by the names used in params.yaml; each drawn by a function of this module):
- ``uniform``: every client has the same |A_i| -- a random regular graph of degree |A| - 1.
- ``general``: degrees vary -- Erdos-Renyi G(N, M) with M = round(N (|A| - 1) / 2) edges, so the
  mean |A| is hit within 1/N.
- ``complete``: the graph federated learning is equivalent to.
Both random topologies are conditioned on connectivity by resampling with the same seeded stream.
The released code of paper A builds a spanning tree plus edges from an unseeded RNG instead; we use a
seeded, documented model so the same seed gives the same graph bit for bit.

Bit for bit on any machine: every decision about edges is integer (integer RNG draws, the edge count
in exact rational arithmetic, connectivity by breadth-first search rather than by an eigenvalue), and
the floats written to graph.json are rounded (see ``save_graph``), because eigenvalues from LAPACK
differ in their last bits between CPUs and BLAS builds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from dssl.artifacts import ArtifactError, read_json, stable_float, stable_floats
from dssl.topology.mixing import distance_to_uniform
from dssl.topology.topology_specs import TOPOLOGY_SPECS, check_request, edge_count_for

TOPOLOGIES = TOPOLOGY_SPECS   # the registry of topologies, under the name this module has always used

MAX_RESAMPLES = 1000
# Significant digits written to graph.json. Mixing weights are exact quotients of small integers
# (correctly rounded on every machine); statistics include LAPACK eigenvalues, whose last ~2 digits
# vary between machines, so they keep 8 digits, far from that noise.
MIXING_DIGITS = 12
STATS_DIGITS = 8


class GraphError(ValueError):
    """A graph request that cannot be satisfied (names the key and how to fix it)."""


@dataclass
class Graph:
    """An undirected simple graph over ``num_clients`` clients, stored as a boolean adjacency."""

    adjacency: np.ndarray
    topology: str
    target_connectivity: float
    seed: int
    spec: dict = field(default_factory=dict)

    @property
    def num_clients(self) -> int:
        return int(self.adjacency.shape[0])

    def degrees(self) -> np.ndarray:
        return self.adjacency.sum(axis=1).astype(np.int64)

    def closed_neighbourhood_sizes(self) -> np.ndarray:
        """|A_i| with the client itself included, as paper A defines it."""
        return self.degrees() + 1

    def edges(self) -> list[tuple[int, int]]:
        rows, cols = np.nonzero(np.triu(self.adjacency, k=1))
        return [(int(i), int(j)) for i, j in zip(rows, cols)]


def _from_networkx(nx_graph, num_clients: int) -> np.ndarray:
    adjacency = np.zeros((num_clients, num_clients), dtype=bool)
    for i, j in nx_graph.edges():
        adjacency[i, j] = adjacency[j, i] = True
    return adjacency


def _is_connected(adjacency: np.ndarray) -> bool:
    """Breadth-first search from client 0: exact, unlike testing an eigenvalue against zero."""
    seen = np.zeros(len(adjacency), dtype=bool)
    frontier = [0]
    seen[0] = True
    while frontier:
        node = frontier.pop()
        for nxt in np.flatnonzero(adjacency[node] & ~seen):
            seen[nxt] = True
            frontier.append(int(nxt))
    return bool(seen.all())


def _sample_connected(draw: Callable[[int], np.ndarray], seed: int, what: str) -> np.ndarray:
    """Resample ``draw(sub_seed)`` until connected; sub-seeds come from one seeded stream."""
    stream = np.random.default_rng(seed)
    for _ in range(MAX_RESAMPLES):
        adjacency = draw(int(stream.integers(2**31 - 1)))
        if _is_connected(adjacency):
            return adjacency
    raise GraphError(
        f"no connected {what} found in {MAX_RESAMPLES} draws; raise 'connectivity' "
        "(sparse random graphs are rarely connected)"
    )


def draw_uniform(num_clients: int, connectivity: float, seed: int) -> np.ndarray:
    import networkx as nx

    degree = int(connectivity) - 1
    if degree == num_clients - 1:
        return draw_complete(num_clients, connectivity, seed)
    return _sample_connected(
        lambda s: _from_networkx(nx.random_regular_graph(degree, num_clients, seed=s), num_clients),
        seed,
        f"regular graph of degree {degree}",
    )


def draw_general(num_clients: int, connectivity: float, seed: int) -> np.ndarray:
    import networkx as nx

    edges = edge_count_for(num_clients, connectivity)
    return _sample_connected(
        lambda s: _from_networkx(nx.gnm_random_graph(num_clients, edges, seed=s), num_clients),
        seed,
        f"Erdos-Renyi G({num_clients}, {edges}) graph",
    )


def draw_complete(num_clients: int, connectivity: float, seed: int) -> np.ndarray:
    return ~np.eye(num_clients, dtype=bool)


def create_graph(spec: dict, num_clients: int, seed: int) -> Graph:
    """Build the graph a params.yaml ``graphs`` entry asks for over ``num_clients`` clients."""
    topology = spec["topology"]
    connectivity = float(spec.get("connectivity", num_clients))
    problems = check_request(topology, num_clients, connectivity)
    if problems:
        raise GraphError("; ".join(problems))
    adjacency = TOPOLOGY_SPECS[topology].draw()(num_clients, connectivity, seed)
    return Graph(adjacency, topology, connectivity, seed, dict(spec))


def spectral_gap(mixing: np.ndarray) -> float:
    """1 - |lambda_2| of a row-stochastic mixing matrix (larger = faster consensus)."""
    moduli = np.sort(np.abs(np.linalg.eigvals(mixing)))[::-1]
    return float(1.0 - moduli[1]) if len(moduli) > 1 else 1.0


def algebraic_connectivity(adjacency: np.ndarray) -> float:
    """Second-smallest eigenvalue of the graph Laplacian (Fiedler value)."""
    laplacian = np.diag(adjacency.sum(axis=1)) - adjacency.astype(float)
    return float(np.sort(np.linalg.eigvalsh(laplacian))[1]) if len(adjacency) > 1 else 0.0


def graph_stats(graph: Graph, mixings: dict[str, np.ndarray]) -> dict[str, float]:
    """Degree statistics, spectral gaps and each rule's distance to the uniform mixing matrix
    (``mixing.distance_to_uniform``), for graph.json, MLflow and paper A's Table 6."""
    sizes = graph.closed_neighbourhood_sizes()
    stats = {
        "num_clients": float(graph.num_clients),
        "num_edges": float(len(graph.edges())),
        "connectivity_mean": float(sizes.mean()),
        "connectivity_min": float(sizes.min()),
        "connectivity_max": float(sizes.max()),
        "connectivity_std": float(sizes.std()),
        "connectivity_error": float(abs(sizes.mean() - graph.target_connectivity)),
        "algebraic_connectivity": algebraic_connectivity(graph.adjacency),
    }
    for rule, matrix in mixings.items():
        stats[f"spectral_gap_{rule}"] = spectral_gap(matrix)
    for rule, matrix in mixings.items():
        stats[f"distance_to_uniform_{rule}"] = distance_to_uniform(matrix, graph.adjacency)
    return stats


def save_graph(graph: Graph, mixings: dict[str, np.ndarray], path: Path) -> dict[str, float]:
    """Write graph.json (deterministic bytes on any machine) and return its statistics as written.

    Floats are rounded (``dssl.artifacts.stable_float``): mixing weights to MIXING_DIGITS significant
    digits, statistics to STATS_DIGITS, anything below 1e-12 in magnitude to 0.
    """
    stats = {k: stable_float(v, STATS_DIGITS) for k, v in graph_stats(graph, mixings).items()}
    record = {
        "topology": graph.topology,
        "num_clients": graph.num_clients,
        "target_connectivity": stable_float(graph.target_connectivity, MIXING_DIGITS),
        "seed": graph.seed,
        "spec": graph.spec,
        "edges": graph.edges(),
        "closed_neighbourhood_sizes": graph.closed_neighbourhood_sizes().tolist(),
        "stats": stats,
        "mixing": {rule: stable_floats(np.asarray(m, dtype=np.float64), MIXING_DIGITS)
                   for rule, m in mixings.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return stats


GRAPH_KEYS = {"topology": str, "num_clients": int, "target_connectivity": float, "seed": int, "spec": dict,
              "edges": list, "mixing": dict}


def load_graph(path: Path) -> tuple[Graph, dict[str, np.ndarray]]:
    """Read a graph.json back: the graph and its saved mixing matrices.

    A missing, truncated or inconsistent file is an ``ArtifactError`` naming it.
    """
    record = read_json(path, GRAPH_KEYS)
    n = record["num_clients"]
    adjacency = np.zeros((n, n), dtype=bool)
    for edge in record["edges"]:
        if not _is_edge(edge, n):
            raise ArtifactError(path, f"edge {edge!r} is not a pair of distinct clients in 0..{n - 1}")
        i, j = edge
        adjacency[i, j] = adjacency[j, i] = True
    graph = Graph(adjacency, record["topology"], float(record["target_connectivity"]), record["seed"],
                  record["spec"])
    return graph, {rule: _mixing(path, rule, m, n) for rule, m in record["mixing"].items()}


def _is_edge(edge: object, n: int) -> bool:
    return (isinstance(edge, list) and len(edge) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < n for v in edge)
            and edge[0] != edge[1])


def _mixing(path: Path, rule: str, values: object, n: int) -> np.ndarray:
    try:
        matrix = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ArtifactError(path, f"mixing matrix {rule!r} is not a numeric matrix ({err})") from err
    if matrix.shape != (n, n):
        raise ArtifactError(path, f"mixing matrix {rule!r} should be {n} x {n}, got shape {list(matrix.shape)}")
    return matrix

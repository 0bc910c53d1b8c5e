"""The graph topologies, declared once (registry ``TOPOLOGY_SPECS``): each topology's name, its options as a
config dataclass (keys, types, ranges) and the function of ``dssl.topology.graphs`` that draws it; with the
feasibility check of a request (``check_request``), which the validator and the graph stage share.

Paper A (Chen et al., ICLR 2026, https://openreview.net/forum?id=c3yt5VSZPQ, Section 5 and Fig. 2a) counts
the closed neighbourhood, |A_i| = 1 + deg(i), so 2 <= |A_i| <= N; its connectivity |A| is the mean |A_i|
(3, 5, 10 and 20 = complete, on 20 clients). Standard library only: the validator imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Any

from dssl.config.options import CLIENTS, SEED
from dssl.config.ranges import Range
from dssl.registry import Registry
from dssl.specs import implementation

CONNECTIVITY = Range(1, CLIENTS.high)


@dataclass(frozen=True)
class GraphEntry:
    """What every ``graphs.<name>`` entry holds besides its topology's options: the partition whose clients
    it connects, the topology and the seed of its draws."""

    partition: str
    topology: str
    seed: Annotated[int, SEED]


@dataclass(frozen=True)
class RandomGraphOptions:
    """``uniform`` and ``general``: ``connectivity``, the mean |A_i| with the client itself (paper A: 3, 5, 10);
    no default. Whether a graph of it exists on the partition's clients is ``check_request``'s."""

    connectivity: Annotated[float, CONNECTIVITY]


@dataclass(frozen=True)
class CompleteGraphOptions:
    """``complete``: the graph federated learning equals; ``connectivity`` may be left out (it is N)."""

    connectivity: Annotated[float | None, CONNECTIVITY] = None


@dataclass(frozen=True)
class TopologySpec:
    """One topology: its name, its options' dataclass, and the function of ``dssl.topology.graphs`` that draws
    its adjacency (``draw(num_clients, connectivity, seed) -> bool matrix``)."""

    name: str
    options: type
    function: str
    module: str = "topology.graphs"

    def draw(self) -> Any:
        """The drawing function, imported now."""
        return implementation(self.module, self.function)


TOPOLOGY_SPECS: Registry[TopologySpec] = Registry("topology")
for _spec in (
    # every client has the same |A_i|: a random regular graph of degree |A| - 1
    TopologySpec("uniform", RandomGraphOptions, "draw_uniform"),
    # degrees vary: Erdos-Renyi G(N, M) with M = round(N (|A| - 1) / 2) edges, so the mean |A| is hit within 1/N
    TopologySpec("general", RandomGraphOptions, "draw_general"),
    TopologySpec("complete", CompleteGraphOptions, "draw_complete"),
):
    TOPOLOGY_SPECS.register(_spec.name)(_spec)


def edge_count_for(num_clients: int, connectivity: float) -> int:
    """round(N (|A| - 1) / 2) (half to even) in exact arithmetic on |A| as written (2.3 is 23/10):
    the float product can fall a hair below or above a half and tip the count."""
    exact = Fraction(repr(float(connectivity)))
    return round(num_clients * (exact - 1) / 2)


def check_request(topology: str, num_clients: int, connectivity: float) -> list[str]:
    """Problems that make a graph request impossible, as messages (empty when feasible)."""
    if topology not in TOPOLOGY_SPECS:
        return [f"unknown topology {topology!r}; known: {TOPOLOGY_SPECS.names()}"]
    if topology == "complete":
        return []
    if not 2 <= connectivity <= num_clients:
        return [f"connectivity {connectivity} is outside 2..N = 2..{num_clients} (|A_i| counts the client itself)"]
    if topology == "uniform":
        return _uniform_problems(num_clients, connectivity)
    if topology == "general" and edge_count_for(num_clients, connectivity) < num_clients - 1:
        minimum = 1 + 2 * (num_clients - 1) / num_clients
        return [f"a connected graph on {num_clients} clients needs connectivity >= {minimum:.2f}"]
    return []


def _uniform_problems(num_clients: int, connectivity: float) -> list[str]:
    degree = connectivity - 1
    if degree != int(degree):
        return [f"uniform topology needs an integer connectivity, got {connectivity}"]
    if (num_clients * int(degree)) % 2:
        return [f"no regular graph of degree {int(degree)} on {num_clients} clients exists "
                "(N * (connectivity - 1) must be even)"]
    if degree == 1 and num_clients > 2:
        return ["connectivity 2 with more than 2 clients is a perfect matching, never connected"]
    return []

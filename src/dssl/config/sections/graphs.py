"""``graphs`` and ``improved_graphs``: a topology over a partition's clients with a reachable
connectivity, and the edges added to an existing graph."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.config.options import GraphOptions, ImprovedGraphOptions
from dssl.topology.graphs import TOPOLOGIES, check_request


GRAPH_KEYS = {"partition", "topology", "connectivity", "seed"}


def check_graphs(c: Checker) -> None:
    partitions = c.params.get("partitions") or {}
    for name, path, spec in c.entries("graphs"):
        c.unknown_keys(spec, GRAPH_KEYS, path)
        partition = c.name_of(spec, "partition", partitions, path, "partitions")
        topology = c.choice(spec, "topology", TOPOLOGIES, path)
        c.declared(spec, "seed", path, GraphOptions, required=True)
        if topology is None or partition is None:
            continue
        clients = (partitions[partition] or {}).get("clients")
        if not isinstance(clients, int):
            continue
        if topology == "complete":
            if "connectivity" in spec and spec["connectivity"] != clients:
                c.add(f"{path}.connectivity", f"the complete graph has connectivity N = {clients}",
                      "drop the key or set it to the partition's client count")
            continue
        connectivity = c.declared(spec, "connectivity", path, GraphOptions, required=True,
                                  hint=f"mean |A_i| incl. self, in 2..{clients}")
        if connectivity is not None:
            for message in check_request(topology, clients, connectivity):
                c.add(f"{path}.connectivity", message, f"partition '{partition}' has N = {clients} clients")


IMPROVE_CRITERIA_NAMES = {"sensitivity", "algebraic_connectivity", "min_degree", "random"}


def check_improved_graphs(c: Checker) -> None:
    graphs = c.params.get("graphs") or {}
    for name, path, spec in c.entries("improved_graphs", required=False):
        if name in graphs:
            c.add(path, "the name is also used in 'graphs'", "give the improved graph its own name")
        c.unknown_keys(spec, {"base", "edges", "criterion", "seed"}, path)
        c.name_of(spec, "base", graphs, path, "graphs")
        c.declared(spec, "edges", path, ImprovedGraphOptions, required=True)
        c.choice(spec, "criterion", IMPROVE_CRITERIA_NAMES, path)
        c.declared(spec, "seed", path, ImprovedGraphOptions, required=True)
        if spec.get("criterion") == "sensitivity" and not c.params.get("theory"):
            c.add(f"{path}.criterion", "the 'sensitivity' criterion needs a 'theory' section (the model)")

"""``graphs`` and ``improved_graphs``: a topology over a partition's clients with a reachable
connectivity, and the edges added to an existing graph."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.config.options import ImprovedGraphOptions
from dssl.config.sections.spec_options import check_options, check_unknown
from dssl.topology.topology_specs import TOPOLOGY_SPECS, GraphEntry, check_request  # standard library only


def check_graphs(c: Checker) -> None:
    """Each graph: the keys its topology's spec declares (any topology's while the topology is unknown), a
    defined partition, and a connectivity some graph on that partition's clients has."""
    partitions = c.params.get("partitions") or {}
    for name, path, spec in c.entries("graphs"):
        known = isinstance(spec.get("topology"), str) and spec["topology"] in TOPOLOGY_SPECS
        options = [TOPOLOGY_SPECS[spec["topology"]].options] if known else [t.options for t in TOPOLOGY_SPECS.values()]
        check_unknown(c, spec, path, GraphEntry, *options)
        partition = c.name_of(spec, "partition", partitions, path, "partitions")
        topology = c.choice(spec, "topology", TOPOLOGY_SPECS.names(), path)
        check_options(c, spec, path, GraphEntry, skip=("partition", "topology"))
        entry = partitions.get(partition) if partition is not None else None
        clients = entry.get("clients") if isinstance(entry, dict) else None
        if topology is not None:
            _check_connectivity(c, spec, path, topology, partition, clients if isinstance(clients, int) else None)


def _check_connectivity(c: Checker, spec: dict, path: str, topology: str, partition: str | None,
                        clients: int | None) -> None:
    """The topology's options, then whether a graph of that connectivity exists on the partition's clients."""
    hints = {"connectivity": f"mean |A_i| incl. self, in 2..{clients}"} if clients is not None else {}
    connectivity = check_options(c, spec, path, TOPOLOGY_SPECS[topology].options, hints=hints).get("connectivity")
    if connectivity is None or clients is None:
        return
    if topology == "complete":
        if connectivity != clients:
            c.add(f"{path}.connectivity", f"the complete graph has connectivity N = {clients}",
                  "drop the key or set it to the partition's client count")
        return
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

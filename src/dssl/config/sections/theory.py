"""``theory``: the linear model's options and its graphs, one client per node."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.config.options import TheoryImprovementOptions, TheoryOptions, keys_of
from dssl.config.sections.names import _name_list


def check_theory(c: Checker) -> None:
    """Graphs against the partitions; the model options are checked by ``pipeline.validate``."""
    theory = c.section("theory", required=False)
    if not theory:
        return
    for key in keys_of(TheoryOptions):
        c.declared(theory, key, "theory", TheoryOptions)
    improvement = theory.get("improvement")
    if isinstance(improvement, dict):
        for key in keys_of(TheoryImprovementOptions):
            c.declared(improvement, key, "theory.improvement", TheoryImprovementOptions)
    graphs = c.params.get("graphs") or {}
    partitions = c.params.get("partitions") or {}
    names = _name_list(c, theory, "graphs", graphs, "theory", "graphs")
    for i, name in enumerate(names):
        clients = (partitions.get(graphs[name].get("partition")) or {}).get("clients")
        if clients is not None and theory.get("N") is not None and clients != theory["N"]:
            c.add(f"theory.graphs[{i}]", f"graph {name!r} has {clients} clients but theory.N = {theory['N']}",
                  "the theory model needs one client per graph node")

"""Stage ``graph_improve@<name>``: add k edges to a graph of the grid, chosen greedily by a criterion
(lower the theory model's DecL sensitivity, raise the algebraic connectivity or the smallest |A_i|, or
at random as a baseline). The result is a graph.json like any other, so DecL training can use it."""

from __future__ import annotations

from pathlib import Path

from dssl.pipeline.common import Stage, graph_file
from dssl.pipeline.graph import client_sizes, write_graph


def run(name: str, params_path: Path | str) -> Path:
    stage = Stage("graph_improve", name, params_path)
    spec = stage.entry("improved_graphs")
    params = stage.params
    from dssl.pipeline.theory import theory_cfg
    from dssl.theory.improve import improve_graph
    from dssl.theory.improvement_study import build_theory_model
    from dssl.topology.graphs import Graph, load_graph

    base, _ = load_graph(graph_file(spec["base"]))
    model = None
    if spec["criterion"] == "sensitivity":
        model = build_theory_model(theory_cfg(params), len(base.adjacency))
    adjacency, history = improve_graph(base.adjacency, int(spec["edges"]), spec["criterion"],
                                       int(spec.get("seed", 0)), model=model)
    graph = Graph(adjacency, base.topology, float(adjacency.sum(axis=1).mean() + 1), base.seed,
                  {**base.spec, "improved": dict(spec)})
    stats, written = write_graph(graph, client_sizes(base.spec["partition"]), name,
                                 f"{name}: {spec['base']} + {spec['edges']} edges ({spec['criterion']})")
    added = {f"step{h['step']}.algebraic_connectivity": h["algebraic_connectivity"] for h in history}
    stage.log({"improved_graphs": {name: spec}}, {**stats, **added}, artifacts=written,
              inputs=[graph_file(spec["base"])])
    return written[0]

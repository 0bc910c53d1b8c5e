"""Drawing of a communication graph: nodes sized and coloured by |A_i| (self included)."""

from __future__ import annotations

from pathlib import Path

from dssl.topology.graphs import Graph


def plot_graph(graph: Graph, out_png: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    nx_graph = nx.Graph()
    nx_graph.add_nodes_from(range(graph.num_clients))
    nx_graph.add_edges_from(graph.edges())
    sizes = graph.closed_neighbourhood_sizes()
    layout = nx.circular_layout(nx_graph)  # deterministic, and shows who links to whom
    fig, ax = plt.subplots(figsize=(4.5, 4.5), dpi=100)
    nx.draw_networkx_edges(nx_graph, layout, ax=ax, alpha=0.4)
    nodes = nx.draw_networkx_nodes(
        nx_graph, layout, ax=ax, node_color=sizes, cmap="viridis", node_size=60 + 20 * sizes
    )
    nx.draw_networkx_labels(nx_graph, layout, ax=ax, font_size=7)
    fig.colorbar(nodes, ax=ax, label="|A_i| (self included)", shrink=0.7)
    ax.set_title(title, fontsize=9)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(out_png, format="png", metadata={"Software": None})
    plt.close(fig)

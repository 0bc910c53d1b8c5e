"""Pretraining grids: which cells a framework trains.

``pretrain.<fl|decl>.grids`` are named after the table they serve; each is models x partitions (FL)
or graphs (DecL) x strategies. ``pretrain.local.grids`` (clients trained alone) are models x
partitions. A framework's cells are the union of its grids; a cell two grids share trains once. Every
cell of a framework trains with the framework's ``train`` settings.
"""

from __future__ import annotations

from typing import Iterator

PLACES = {"fl": "partitions", "decl": "graphs"}
Cell = tuple[str, str, str]   # (model, partition or graph, strategy)


def _grid_cells(grid: dict, place: str) -> Iterator[Cell]:
    for model in grid.get("models") or []:
        for where in grid.get(place) or []:
            for strategy in grid.get("strategies") or []:
                yield model, where, strategy


LOCAL_VS_GLOBAL = ("weight_distance", "features")   # sections whose grids name FL cells


def named_grids(params: dict, section: str) -> dict[str, list]:
    """The cells of each named grid of ``section``, in the order the grid lists them: ``fl`` and ``decl``
    (``pretrain.<framework>.grids``: (model, partition or graph, strategy)), ``local``
    (``pretrain.local.grids``: (model, partition)), ``weight_distance`` or ``features`` (their grids of FL
    cells)."""
    if section in LOCAL_VS_GLOBAL:
        grids, place = (params.get(section) or {}).get("grids") or {}, PLACES["fl"]
    else:
        grids = ((params.get("pretrain") or {}).get(section) or {}).get("grids") or {}
        place = PLACES.get(section)
    if place is None:  # stand-alone grids: models x partitions
        return {name: list(dict.fromkeys((model, partition) for model in (grid or {}).get("models") or []
                                         for partition in (grid or {}).get("partitions") or []))
                for name, grid in grids.items()}
    return {name: list(dict.fromkeys(_grid_cells(grid or {}, place))) for name, grid in grids.items()}


def _union(grids: dict[str, list]) -> list:
    return list(dict.fromkeys(cell for cells in grids.values() for cell in cells))


def local_vs_global_cells(params: dict, section: str) -> list[Cell]:
    """(model, partition, strategy) of every FL cell a section comparing stand-alone clients with the FL
    cell's global model names in its ``grids`` (``weight_distance``: paper A's Table 5; ``features``: its
    Fig. 3), each once."""
    return _union(named_grids(params, section))


def weight_distance_cells(params: dict) -> list[Cell]:
    """(model, partition, strategy) of every FL cell paper A's Table 5 measures (``weight_distance.grids``)."""
    return local_vs_global_cells(params, "weight_distance")


def feature_cells(params: dict) -> list[Cell]:
    """(model, partition, strategy) of every FL cell paper A's Fig. 3 embeds (``features.grids``)."""
    return local_vs_global_cells(params, "features")


def local_cells(params: dict) -> list[tuple[str, str]]:
    """(model, partition) of every stand-alone cell (``pretrain.local.grids``), each once."""
    return _union(named_grids(params, "local"))


def local_clients(params: dict, partition: str, count: int) -> list[int]:
    """The clients a stand-alone cell of ``partition`` trains: ``pretrain.local.clients.<partition>``, or
    all ``count`` clients of the partition when it names none."""
    chosen = (((params.get("pretrain") or {}).get("local") or {}).get("clients") or {}).get(partition)
    return [int(c) for c in chosen] if chosen is not None else list(range(count))


def grid_cells(params: dict, framework: str) -> list[Cell]:
    """(model, partition or graph, strategy) of every cell, each once, in the order the grids list them."""
    return _union(named_grids(params, framework))

"""Pretraining grids: which cells a framework trains.

``pretrain.<fl|decl>.grids`` are named after the table they serve; each is models x partitions (FL)
or graphs (DecL) x strategies. A framework's cells are the union of its grids; a cell two grids share
trains once. Every cell of a framework trains with the framework's ``train`` settings.
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


def weight_distance_cells(params: dict) -> list[Cell]:
    """(model, partition, strategy) of every FL cell paper A's Table 5 measures (``weight_distance.grids``)."""
    grids = (params.get("weight_distance") or {}).get("grids") or {}
    cells = (cell for grid in grids.values() for cell in _grid_cells(grid or {}, PLACES["fl"]))
    return list(dict.fromkeys(cells))


def grid_cells(params: dict, framework: str) -> list[Cell]:
    """(model, partition or graph, strategy) of every cell, each once, in the order the grids list them."""
    grids = ((params.get("pretrain") or {}).get(framework) or {}).get("grids") or {}
    cells = (cell for grid in grids.values() for cell in _grid_cells(grid or {}, PLACES[framework]))
    return list(dict.fromkeys(cells))

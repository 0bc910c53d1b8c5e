"""Pretraining grids: which cells a framework trains.

``pretrain.<fl|decl>.grids`` are named after the table they serve; each is models x partitions (FL)
or graphs (DecL) x strategies. ``pretrain.local.grids`` (clients trained alone) are models x
partitions. A framework's cells are the union of its grids; a cell two grids share trains once. Every
cell of a framework trains with the framework's ``train`` settings.

Seeds: every cell runs the top-level ``seeds`` list, unless a grid that lists it sets its own ``seeds``
(more seeds where a table's intervals need them, without paying for them everywhere). A cell runs one
list: grids that share a cell must agree on it (``dssl validate``). The random-init reference of a
backbone runs every seed any cell of that backbone runs, so that each cell pairs with it seed by seed.
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


TOP_LEVEL_SEEDS = "seeds"
SEEDED = ("fl", "decl", "local")   # frameworks whose grids may set their own seeds


def _raw_grids(params: dict, framework: str) -> dict:
    return ((params.get("pretrain") or {}).get(framework) or {}).get("grids") or {}


def all_grid_seed_keys(params: dict, framework: str) -> dict[tuple, list[str]]:
    """Every cell of a framework's grids with the params keys of the seed lists its grids give it, in grid
    order: a grid's own ``pretrain.<framework>.grids.<name>.seeds``, or the top-level ``seeds`` for a
    grid without one."""
    raw, keys = _raw_grids(params, framework), {}
    for name, cells in named_grids(params, framework).items():
        key = f"pretrain.{framework}.grids.{name}.seeds" if "seeds" in (raw.get(name) or {}) else TOP_LEVEL_SEEDS
        for cell in cells:
            keys.setdefault(cell, [])
            if key not in keys[cell]:
                keys[cell].append(key)
    return keys


def cell_seed_keys(params: dict, framework: str) -> dict[tuple, str]:
    """``seeds_key`` of every cell of a framework's grids, from one pass over them."""
    return {cell: keys[0] for cell, keys in all_grid_seed_keys(params, framework).items()}


def seeds_keys(params: dict, framework: str, cells: list[tuple]) -> list[str]:
    """``seeds_key`` of each of ``cells``, from one pass over the framework's grids."""
    keys = cell_seed_keys(params, framework) if framework in SEEDED else {}
    return [keys.get(tuple(cell), TOP_LEVEL_SEEDS) for cell in cells]


def seeds_key(params: dict, framework: str, cell: tuple) -> str:
    """The params key that declares the seeds of a cell (``framework`` ``fl``, ``decl`` or ``local``;
    ``central`` cells run the top-level list): the first of the cell's keys in ``all_grid_seed_keys``, or the top-level
    ``seeds`` for a cell no grid lists."""
    return seeds_keys(params, framework, [cell])[0]


def seeds_at(params: dict, key: str) -> list[int]:
    """The seed list at a dotted params key (``seeds_key``)."""
    value = params
    for part in key.split("."):
        value = value[part]
    return [int(s) for s in value]


def cell_seeds(params: dict, framework: str, cell: tuple) -> list[int]:
    """The seeds a cell trains and is evaluated on (``seeds_key``)."""
    return seeds_at(params, seeds_key(params, framework, cell))


def shared_seeds(params: dict, cell: Cell) -> list[int]:
    """The seeds of an FL cell that its stand-alone cell (same model and partition) also trains: what a
    section comparing the two (Table 5's weight distance) pairs on."""
    local = set(cell_seeds(params, "local", cell[:2]))
    return [seed for seed in cell_seeds(params, "fl", cell) if seed in local]


def reference_seed_keys(params: dict, backbones: list[str]) -> list[str]:
    """The keys of every seed list a cell of a model on one of ``backbones`` runs, the top-level ``seeds``
    first: what the random-init reference of those backbones runs, so that each cell pairs with it seed
    by seed."""
    models = {model for backbone in backbones for model in backbone_models(params, backbone)}
    keys = [TOP_LEVEL_SEEDS]
    for framework in SEEDED:
        keys += [key for cell, key in cell_seed_keys(params, framework).items() if cell[0] in models]
    return list(dict.fromkeys(keys))


def reference_seeds(params: dict, backbone: str) -> list[int]:
    """Every seed the random-init reference of ``backbone`` runs, sorted (``reference_seed_keys``)."""
    return sorted({seed for key in reference_seed_keys(params, [backbone]) for seed in seeds_at(params, key)})


def backbone_models(params: dict, backbone: str) -> list[str]:
    """The models whose encoder is ``backbone`` (the random-init reference of that backbone serves them)."""
    return [name for name, spec in (params.get("models") or {}).items() if (spec or {}).get("backbone") == backbone]


def grid_cells(params: dict, framework: str) -> list[Cell]:
    """(model, partition or graph, strategy) of every cell, each once, in the order the grids list them."""
    return _union(named_grids(params, framework))

"""``weight_distance`` (paper A's Table 5) and ``features`` (Fig. 3): stand-alone clients beside the
global model of an FL cell, both trained, on shared seeds."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.config.sections.names import _name_list
from dssl.config.sections.seeds import _is_index, _seed_lists_valid


def check_weight_distance(c: Checker) -> None:
    """Paper A's Table 5: grids of existing FL cells whose stand-alone cells train ``clients``."""
    section = c.section("weight_distance", required=False)
    if section:
        c.unknown_keys(section, {"clients", "grids"}, "weight_distance")
        _check_local_and_global(c, "weight_distance", "Table 5")


def check_features(c: Checker) -> None:
    """Paper A's Fig. 3: test features of stand-alone clients and FL cells, of one seed of ``seeds``."""
    section = c.section("features", required=False)
    if not section:
        return
    path = "features"
    c.unknown_keys(section, {"dataset", "images", "seed", "clients", "grids"}, path)
    datasets = c.params.get("datasets") or {}
    if section.get("dataset") not in datasets:
        c.add(f"{path}.dataset", f"{section.get('dataset')!r} is not defined in 'datasets'",
              f"the dataset whose test split is embedded, one of: {', '.join(sorted(datasets)) or '(none defined)'}")
    c.number(section, "images", path, integer=True, low=10, required=False,
             hint="how many test images (a class-stratified subset) each panel embeds")
    _check_local_and_global(c, path, "Fig. 3")
    _check_feature_seed(c, section.get("seed"))


def _check_feature_seed(c: Checker, seed: object) -> None:
    """Fig. 3 shows one seed's models: every FL cell it embeds and its stand-alone cell train that seed."""
    from dssl.config.grids import cell_seeds, feature_cells

    if not _is_index(seed):
        c.add("features.seed", f"must be an integer >= 0, got {seed!r}", "one of the seeds the FL cells train")
        return
    if not _seed_lists_valid(c.params):
        return   # reported where the list is
    try:
        cells = [(("fl", cell), ("local", cell[:2])) for cell in feature_cells(c.params)]
        trained = {" / ".join(cell): cell_seeds(c.params, framework, cell)
                   for pair in cells for framework, cell in pair}
    except (AttributeError, KeyError, TypeError, ValueError):   # malformed grids or seeds: reported by their checks
        trained = {"seeds": c.params.get("seeds") or []}
    lacking = {cell: seeds for cell, seeds in trained.items() if seed not in seeds}
    if lacking:
        cell, seeds = next(iter(lacking.items()))
        c.add("features.seed", f"{seed!r} is not one of the seeds {seeds} that {cell} trains",
              "the figure shows the models of one seed the pretraining stages train")


def _check_local_and_global(c: Checker, path: str, table: str) -> None:
    """A section comparing stand-alone clients with FL cells: ``clients`` and ``grids`` of existing FL
    cells whose stand-alone cells train those clients."""
    from dssl.config.grids import grid_cells, local_cells, local_vs_global_cells

    section = c.params[path]
    clients = section.get("clients")
    if not isinstance(clients, list) or len(clients) < 2 or not all(_is_index(x) for x in clients):
        c.add(f"{path}.clients", "must be a list of at least two client indices (integers >= 0)",
              "paper A compares clients 1 and 100: [0, <clients - 1>]")
        clients = []
    grids = c.mapping(section.get("grids"), f"{path}.grids") or {}
    fl_cells, stand_alone = set(grid_cells(c.params, "fl")), set(local_cells(c.params))
    partitions = c.params.get("partitions") or {}
    for name, grid in grids.items():
        where = f"{path}.grids.{name}"
        if c.mapping(grid, where) is None:
            continue
        c.unknown_keys(grid, {"models", "partitions", "strategies"}, where)
        for key in ("models", "partitions", "strategies"):
            _name_list(c, grid, key, c.params.get(key) or {}, where, key)
    for model, partition, strategy in local_vs_global_cells(c.params, path):
        both_trained = (model, partition, strategy) in fl_cells and (model, partition) in stand_alone
        if both_trained and not _shares_seeds(c, (model, partition, strategy)):
            c.add(path, f"FL cell {model} / {partition} / {strategy} and its stand-alone cell share no seed",
                  f"{table} pairs them seed by seed: give their grids a common seed")
        if (model, partition, strategy) not in fl_cells:
            c.add(path, f"cell {model} / {partition} / {strategy} is not an FL cell of pretrain.fl.grids",
                  f"{table} compares local models with an FL cell's global model: add the cell to an FL grid")
        if (model, partition) not in stand_alone:
            c.add("pretrain.local.grids", f"{model} / {partition} has no stand-alone cell", f"{table}'s local models "
                  f"are pretrain_local@{model}-{partition}'s: add {model} and {partition} to a pretrain.local grid")
        count = (partitions.get(partition) or {}).get("clients")
        if isinstance(count, int) and any(x >= count for x in clients):
            c.add(f"{path}.clients", f"{clients} names a client beyond the {count} clients of partition {partition!r}")
        elif isinstance(count, int) and (untrained := set(clients) - _trained(c, partition, count)):
            c.add(f"{path}.clients",
                  f"{clients}: pretrain.local.clients.{partition} does not train {sorted(untrained)}",
                  f"add them to pretrain.local.clients.{partition}")


def _shares_seeds(c: Checker, cell: tuple) -> bool:
    from dssl.config.grids import shared_seeds

    if not _seed_lists_valid(c.params):
        return True   # reported where the list is
    try:
        return bool(shared_seeds(c.params, cell))
    except (AttributeError, KeyError, TypeError, ValueError):   # malformed seeds: reported by their checks
        return True


def _trained(c: Checker, partition: str, count: int) -> set[int]:
    """The clients a stand-alone cell of ``partition`` trains (a malformed list is reported elsewhere)."""
    from dssl.config.grids import local_clients

    try:
        return set(local_clients(c.params, partition, count))
    except (TypeError, ValueError):
        return set(range(count))

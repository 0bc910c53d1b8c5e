"""``pretrain``: the dataset and image size, the optimizer recipes per family, and each framework's
schedule and grids of defined models x partitions (FL, stand-alone) or graphs (DecL) x strategies."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.data.dataset_specs import DATASET_SPECS  # standard library only
from dssl.config.lookups import graph_partition
from dssl.config.options import PretrainOptions
from dssl.config.sections.names import _name_list
from dssl.config.sections.seeds import _check_seed_list, _check_shared_cells, _is_index
from dssl.config.sections.strategies import _check_grid_strategies
from dssl.config.sections.training import SCHEDULES, _check_optimizer, _check_train


GRID_PLACES = {"fl": ("partitions", "partitions"), "decl": ("graphs", "graphs' or 'improved_graphs")}


def check_pretrain(c: Checker) -> None:
    pretrain = c.section("pretrain")
    if not pretrain:
        return
    c.unknown_keys(pretrain, {"dataset", "image_size", "optimizers", "fl", "decl", "central", "local"}, "pretrain")
    c.name_of(pretrain, "dataset", c.params.get("datasets") or {}, "pretrain", "datasets")
    c.declared(pretrain, "image_size", "pretrain", PretrainOptions, required=True)
    _check_decoded_size(c, pretrain)
    optimizers = c.mapping(pretrain.get("optimizers", {}), "pretrain.optimizers") or {}
    for family in ("cnn", "vit"):
        _check_optimizer(c, optimizers.get(family), f"pretrain.optimizers.{family}")
    models = c.params.get("models") or {}
    for framework in ("fl", "decl", "central"):  # dvc.yaml expands every one of them
        if framework in pretrain:
            _check_framework(c, pretrain, framework, models)
        else:
            c.add(f"pretrain.{framework}", "missing section", "dvc.yaml and the Snakefile expand its grid")
    if "local" in pretrain:   # optional: stand-alone clients
        _check_local(c, pretrain, models)
    for framework in ("fl", "decl", "local"):
        _check_shared_cells(c, framework)


def _check_local(c: Checker, pretrain: dict, models: dict) -> None:
    """``pretrain.local``: a schedule, grids of models x partitions, and optionally which clients of a
    partition train alone (``clients: {<partition>: [indices]}``; a partition not named trains them all)."""
    path = "pretrain.local"
    entry = c.mapping(pretrain["local"], path)
    if entry is None:
        return
    c.unknown_keys(entry, {"train", "clients", "grids"}, path)
    train = c.mapping(entry.get("train"), f"{path}.train")
    if train is not None:
        _check_train(c, train, (SCHEDULES["local"],), f"{path}.train")
    partitions = c.params.get("partitions") or {}
    for name, chosen in (c.mapping(entry.get("clients", {}), f"{path}.clients") or {}).items():
        where = f"{path}.clients.{name}"
        if name not in partitions:
            c.add(where, f"{name!r} is not defined in 'partitions'")
            continue
        count = (partitions.get(name) or {}).get("clients")
        if not isinstance(chosen, list) or not chosen or not all(_is_index(x) for x in chosen):
            c.add(where, "must be a non-empty list of client indices (integers >= 0)")
        elif isinstance(count, int) and any(x >= count for x in chosen):
            c.add(where, f"{chosen} names a client beyond the {count} clients of partition {name!r}")
    for name, grid in (c.mapping(entry.get("grids"), f"{path}.grids") or {}).items():
        where = f"{path}.grids.{name}"
        if c.mapping(grid, where) is None:
            continue
        c.unknown_keys(grid, {"models", "partitions", "seeds"}, where)
        if "seeds" in grid:
            _check_seed_list(c, grid["seeds"], f"{where}.seeds")
        _name_list(c, grid, "models", models, where, "models")
        for i, partition in enumerate(_name_list(c, grid, "partitions", partitions, where, "partitions")):
            _partition_of_pretrain_dataset(c, pretrain, partition, f"{where}.partitions[{i}]")


def _check_decoded_size(c: Checker, pretrain: dict) -> None:
    """An image folder is decoded once, at its ``image_size``, by the prepare stage; pretraining at
    another size would resize every batch again, the per-epoch image work the prepared array avoids."""
    dataset, size = pretrain.get("dataset"), pretrain.get("image_size")
    if not isinstance(dataset, str) or dataset not in DATASET_SPECS or not DATASET_SPECS[dataset].needs_root \
            or not isinstance(size, int):
        return
    spec = (c.params.get("datasets") or {}).get(dataset) or {}
    decoded = spec.get("image_size", DATASET_SPECS[dataset].defaults()["image_size"])
    if decoded != size:
        c.add("pretrain.image_size", f"{size} px, but datasets.{dataset}.image_size decodes {dataset} at "
              f"{decoded} px", f"set datasets.{dataset}.image_size to {size}, so the prepared array holds "
              "the training resolution and no batch is resized")


def _check_framework(c: Checker, pretrain: dict, framework: str, models: dict) -> None:
    path = f"pretrain.{framework}"
    entry = c.mapping(pretrain[framework], path)
    if entry is None:
        return
    train = c.mapping(entry.get("train"), f"{path}.train")
    if framework == "central":
        c.unknown_keys(entry, {"models", "train"}, path)
        _name_list(c, entry, "models", models, path, "models")
        if train is not None:
            _check_train(c, train, (SCHEDULES["central"],), f"{path}.train")
        return
    c.unknown_keys(entry, {"grids", "train"}, path)
    grids = c.mapping(entry.get("grids"), f"{path}.grids") or {}
    for name, grid in grids.items():
        _check_grid(c, pretrain, framework, models, c.mapping(grid, f"{path}.grids.{name}"), f"{path}.grids.{name}")
    if train is not None:
        _check_train(c, train, (SCHEDULES[framework],), f"{path}.train")
    if framework == "fl" and train is not None:
        _check_clients_per_round(c, train, grids)


def _check_grid(c: Checker, pretrain: dict, framework: str, models: dict, grid: dict | None, path: str) -> None:
    """One grid: models x partitions (FL) or graphs (DecL) x strategies, each a defined name."""
    if grid is None:
        return
    place, what = GRID_PLACES[framework]
    c.unknown_keys(grid, {"models", place, "strategies", "seeds"}, path)
    if "seeds" in grid:
        _check_seed_list(c, grid["seeds"], f"{path}.seeds")
    _name_list(c, grid, "models", models, path, "models")
    _name_list(c, grid, "strategies", c.params.get("strategies") or {}, path, "strategies")
    _check_grid_strategies(c, grid, framework, path)
    if framework == "fl":
        for i, name in enumerate(_name_list(c, grid, place, c.params.get("partitions") or {}, path, what)):
            _partition_of_pretrain_dataset(c, pretrain, name, f"{path}.{place}[{i}]")
        return
    graphs = {**(c.params.get("graphs") or {}), **(c.params.get("improved_graphs") or {})}
    for i, name in enumerate(_name_list(c, grid, place, graphs, path, what)):
        partition = graph_partition(c.params, name)
        if partition:
            _partition_of_pretrain_dataset(c, pretrain, partition, f"{path}.{place}[{i}]")


def _check_clients_per_round(c: Checker, train: dict, grids: dict) -> None:
    """Every FL cell samples at most as many clients per round as its partition has (the strategy
    entry's ``train`` override, where it sets ``clients_per_round``, wins over the framework's)."""
    partitions, entries = c.params.get("partitions") or {}, c.params.get("strategies") or {}
    for grid in grids.values():
        if not isinstance(grid, dict):
            continue
        for strategy in grid.get("strategies") or []:
            entry = entries.get(strategy) if isinstance(strategy, str) else None
            override = (entry or {}).get("train") if isinstance(entry, dict) else None
            per_round = {**train, **(override if isinstance(override, dict) else {})}.get("clients_per_round")
            for name in sorted(n for n in grid.get("partitions") or [] if isinstance(n, str)):
                clients = (partitions.get(name) or {}).get("clients")
                if isinstance(per_round, int) and isinstance(clients, int) and per_round > clients:
                    where = (f"strategies.{strategy}.train.clients_per_round" if override and "clients_per_round"
                             in override else "pretrain.fl.train.clients_per_round")
                    c.add(where, f"{per_round} > the {clients} clients of partition {name!r}")
                    return


def _partition_of_pretrain_dataset(c: Checker, pretrain: dict, name: str, where: str) -> dict:
    spec = (c.params.get("partitions") or {}).get(name) or {}
    if spec and pretrain.get("dataset") and spec.get("dataset") != pretrain["dataset"]:
        c.add(where, f"partition {name!r} splits {spec.get('dataset')!r}, not the pretraining dataset "
                     f"{pretrain['dataset']!r}", "pretraining partitions must split pretrain.dataset")
    return spec

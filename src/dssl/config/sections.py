"""Validators of the params.yaml sections, one function per section (registered in order)."""

from __future__ import annotations

import math
from pathlib import Path

from dssl.config.checker import Checker, section_validator
from dssl.config.ranges import declared_options
from dssl.config.methods import declared_methods, value_problem  # torch-free: read from the method modules
from dssl.config.options import (
    CentralSchedule,
    DatasetOptions,
    DecLSchedule,
    FLSchedule,
    GraphOptions,
    ImprovedGraphOptions,
    OptimizerRecipe,
    PartitionOptions,
    PretrainOptions,
    TheoryImprovementOptions,
    TheoryOptions,
    keys_of,
)
from dssl.config.strategies import declared_strategies  # torch-free: read from the strategy modules
from dssl.data.layouts import LayoutProblem, detect_layout, layout_help  # standard library only
from dssl.evaluation import PROTOCOLS  # torch-free: a protocol's implementation loads when it runs
from dssl.evaluation.registry import FAMILIES, OVERRIDE_KEYS, override_names, resolve_overrides
from dssl.registry import UnknownNameError, entry_options
from dssl.topology.graphs import TOPOLOGIES, check_request
from dssl.topology.mixing import MIXING, ORDERS
from dssl.training.options import STEP_KEYS, step_problems  # torch-free

# Facts the validator needs without importing the data code (which imports torch). A test keeps
# these names equal to the dataset registry's keys.
DATASET_FACTS = {
    "digits": {"num_classes": 10, "train_size": None, "needs_root": False},
    "digits_on_photos": {"num_classes": 10, "train_size": None, "needs_root": False},
    "cifar10": {"num_classes": 10, "train_size": 50000, "needs_root": False},
    "cifar100": {"num_classes": 100, "train_size": 50000, "needs_root": False},
    # Mini-ImageNet pretrains on every image by default (test_fraction 0): a test split is optional.
    "mini_imagenet": {"num_classes": 100, "train_size": None, "needs_root": True, "image_size": 84,
                      "optional_test": True},
    "imagenet": {"num_classes": 1000, "train_size": None, "needs_root": True, "image_size": 224},
}
DIGITS_SIZE = 1797  # scikit-learn's load_digits

DATASET_KEYS = {
    "digits": {"test_fraction", "split_seed"},
    # split_seed: the train/test split of the source digits; seed: the photograph crops alone
    "digits_on_photos": {"image_size", "composites_per_digit", "test_fraction", "split_seed", "seed"},
    # verify_md5: false reads a CIFAR-format tarball that is not the official release (a subset)
    "cifar10": {"root", "verify_md5"},
    "cifar100": {"root", "verify_md5"},
    "mini_imagenet": {"root", "image_size", "test_fraction", "split_seed"},
    "imagenet": {"root", "image_size"},
}

COMMON_PARTITION_KEYS = {"dataset", "scheme", "clients", "seed"}
PARTITION_SCHEME_KEYS = {
    "iid": set(),
    "dirichlet_balanced": {"alpha", "sinkhorn_iters", "rounding"},
    "dirichlet_min_size": {"alpha", "min_size"},
    "k_classes": {"classes_per_client"},
    "feature": {"augment"},
}
GRAPH_KEYS = {"partition", "topology", "connectivity", "seed"}


def dataset_train_size(name: str, spec: dict) -> int | None:
    """Training-split size known without loading the data (None when it needs a folder scan)."""
    if name in ("digits", "digits_on_photos"):
        test_fraction = spec.get("test_fraction", 0.25)
        copies = spec.get("composites_per_digit", 1) if name == "digits_on_photos" else 1
        return (DIGITS_SIZE - math.ceil(test_fraction * DIGITS_SIZE)) * copies
    return DATASET_FACTS[name]["train_size"]


@section_validator
def check_datasets(c: Checker) -> None:
    for name, spec in c.section("datasets").items():
        path = f"datasets.{name}"
        if name not in DATASET_FACTS:
            c.add(path, "unknown dataset", f"one of: {', '.join(sorted(DATASET_FACTS))}")
            continue
        spec = c.mapping(spec if spec is not None else {}, path)
        if spec is None:
            continue
        c.unknown_keys(spec, DATASET_KEYS[name], path)
        if "test_fraction" in spec:
            optional = DATASET_FACTS[name].get("optional_test", False)
            c.number(spec, "test_fraction", path, low=0, high=0.9, low_open=not optional)
        for key in ("image_size", "composites_per_digit", "seed", "split_seed"):
            c.declared(spec, key, path, DatasetOptions)
        if "verify_md5" in spec and not isinstance(spec["verify_md5"], bool):
            c.add(f"{path}.verify_md5", f"must be true or false, got {spec['verify_md5']!r}")
        if DATASET_FACTS[name]["needs_root"]:
            _check_root(c, spec, path, name)


def _check_root(c: Checker, spec: dict, path: str, name: str) -> None:
    root = spec.get("root")
    if not root:
        c.add(f"{path}.root", "missing", f"the folder holding {name} as {layout_help(name)}")
        return
    folder = Path(root) if Path(root).is_absolute() else c.root / root
    try:
        detect_layout(name, folder)
        if name == "imagenet" and not (folder / "train").is_dir():
            raise LayoutProblem(f"{folder} has no train/ folder")
    except LayoutProblem as problem:
        c.add(f"{path}.root", str(problem), f"accepted: {layout_help(name)}")


def has_test_split(name: str, spec: dict, root: Path) -> bool:
    """Whether the prepared dataset will have a test split: always, except Mini-ImageNet without
    ``test_fraction`` unless its folder is a split of the images with a test/ folder."""
    if not DATASET_FACTS[name].get("optional_test") or spec.get("test_fraction"):
        return True
    folder = Path(spec.get("root") or "")
    folder = folder if folder.is_absolute() else root / folder
    try:
        return detect_layout(name, folder) == "splits" and (folder / "test").is_dir()
    except LayoutProblem:
        return True  # reported under datasets.<name>.root


@section_validator
def check_partitions(c: Checker) -> None:
    datasets = c.params.get("datasets") or {}
    for name, path, spec in c.entries("partitions"):
        scheme = c.choice(spec, "scheme", PARTITION_SCHEME_KEYS, path)
        if scheme is not None:
            c.unknown_keys(spec, COMMON_PARTITION_KEYS | PARTITION_SCHEME_KEYS[scheme], path)
        dataset = c.name_of(spec, "dataset", datasets, path, "datasets")
        clients = c.declared(spec, "clients", path, PartitionOptions, required=True)
        c.declared(spec, "seed", path, PartitionOptions, required=True)
        if dataset in DATASET_FACTS and clients is not None:
            size = dataset_train_size(dataset, datasets.get(dataset) or {})
            if size is not None and clients > size:
                c.add(f"{path}.clients", f"{clients} clients but {dataset} has only {size} training samples",
                      "use fewer clients")
        if scheme in ("dirichlet_balanced", "dirichlet_min_size"):
            c.declared(spec, "alpha", path, PartitionOptions, required=True,
                       hint="Dirichlet concentration > 0; 1e5 ~ IID")
        if scheme == "dirichlet_balanced":
            c.declared(spec, "sinkhorn_iters", path, PartitionOptions)
        if scheme == "dirichlet_balanced" and "rounding" in spec:
            from dssl.data.partition import ROUNDINGS

            c.choice(spec, "rounding", ROUNDINGS, path)
        if scheme == "dirichlet_min_size":
            c.declared(spec, "min_size", path, PartitionOptions)
        if scheme == "k_classes":
            _check_k_classes(c, spec, path, dataset)
        if scheme == "feature" and "augment" in spec:
            _check_augment(c, spec["augment"], f"{path}.augment")


def _check_augment(c: Checker, augment: object, path: str) -> None:
    if c.mapping(augment, path) is None:
        return
    from dssl.data.partition import AUGMENT_DEFAULTS

    c.unknown_keys(augment, AUGMENT_DEFAULTS, path)


def _check_k_classes(c: Checker, spec: dict, path: str, dataset: str | None) -> None:
    per_client = c.declared(spec, "classes_per_client", path, PartitionOptions, required=True)
    if per_client is not None and dataset in DATASET_FACTS:
        num_classes = DATASET_FACTS[dataset]["num_classes"]
        if per_client > num_classes:
            c.add(f"{path}.classes_per_client", f"{per_client} > the {num_classes} classes of {dataset}")


@section_validator
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


# Registry names the training sections may use. Kept here so validation never imports torch; a test
# keeps each set equal to its registry (dssl.models.BACKBONES, ...). Methods are read from their
# modules (dssl.config.methods), with their hyper-parameters.
PROTOCOL_NAMES = set(PROTOCOLS)
VIT_POOLS = ("token", "avg")   # dssl.models.vit.POOLS: which features a ViT hands to evaluation
FRAMEWORKS = ("fl", "decl", "central", "local", "random")
OPTIMIZER_KEYS = keys_of(OptimizerRecipe)
OPTIMIZER_NAMES = {"sgd", "adamw", "adam"}
SCHEDULE_NAMES = {"constant", "cosine"}
# A strategy entry's ``train`` may also replace the model's optimizer recipe (a baseline trained as its authors did).
ENTRY_RECIPE_KEY = "optimizer"
# Training and evaluation seeds come from the top-level 'seeds' list (one run per seed), not these.
# Every training section also takes the step options (STEP_KEYS: device, precision, channels_last, compile).
FL_TRAIN_KEYS = keys_of(FLSchedule)
DECL_TRAIN_KEYS = keys_of(DecLSchedule)
GRID_PLACES = {"fl": ("partitions", "partitions"), "decl": ("graphs", "graphs' or 'improved_graphs")}
# keys of a DecL strategy entry that configure the round itself, beside the strategy's own options
DECL_ROUND_KEYS = {"mixing", "order"}
TRAIN_KEYS = {"fl": FL_TRAIN_KEYS, "decl": DECL_TRAIN_KEYS}
CENTRAL_TRAIN_KEYS = keys_of(CentralSchedule)
SCHEDULES = {"fl": FLSchedule, "decl": DecLSchedule, "central": CentralSchedule, "local": CentralSchedule}


def backbone_family(backbone: str) -> str:
    """'vit' or 'cnn' (``FAMILIES``), as the backbone's registration declares it: selects the optimizer
    recipe (paper A trains ViTs with AdamW, CNNs with SGD) and an evaluation protocol's ``per_family``
    overrides. An unknown name raises ``UnknownNameError``."""
    families = backbone_families()
    if backbone not in families:
        raise UnknownNameError(f"unknown backbone {backbone!r}; known: {', '.join(sorted(families))}")
    return families[backbone]


def backbone_families() -> dict[str, str]:
    """Every backbone name -> its family, read from the ``@register_backbone`` declarations (torch-free)."""
    return {name: str(options["family"]) for name, options in entry_options("backbone").items()}


@section_validator
def check_models(c: Checker) -> None:
    for name, path, spec in c.entries("models"):
        c.unknown_keys(spec, {"method", "backbone", "hparams"}, path)
        method = c.choice(spec, "method", declared_methods(), path)
        c.choice(spec, "backbone", set(backbone_families()), path)
        hparams = c.mapping(spec["hparams"], f"{path}.hparams") if "hparams" in spec else None
        if method is not None and hparams:
            _check_method_hparams(c, declared_methods()[method], hparams, f"{path}.hparams")


def _check_method_hparams(c: Checker, method, hparams: dict, path: str) -> None:
    """A model's ``hparams``: keyword-only arguments of its method's constructor, each value of the
    argument's annotated type (ranges are the method's to check when it is built)."""
    accepted = method.hparam_names
    for key, value in hparams.items():
        if key not in accepted:
            c.add(f"{path}.{key}", f"method {method.name!r} has no hyper-parameter {key!r}",
                  f"accepted: {', '.join(accepted)}")
            continue
        hparam = method.hparam(key)
        problem = value_problem(value, hparam.annotation)
        if problem:
            c.add(f"{path}.{key}", problem, f"method {method.name!r} default: {hparam.default}")


def _name_list(c: Checker, entry: dict, key: str, names, path: str, what: str) -> list:
    values = entry.get(key)
    if not isinstance(values, list) or not values:
        c.add(f"{path}.{key}", "must be a non-empty list", f"names from '{what}'")
        return []
    for i, value in enumerate(values):
        if value not in names:
            c.add(f"{path}.{key}[{i}]", f"{value!r} is not defined in '{what}'",
                  f"one of: {', '.join(sorted(names)) or '(none defined)'}")
    return [v for v in values if v in names]


def _check_optimizer(c: Checker, spec: object, path: str) -> None:
    """An optimizer recipe: ``pretrain.optimizers.<family>`` or a strategy entry's ``train.optimizer``."""
    spec = c.mapping(spec, path)
    if spec is not None:
        c.unknown_keys(spec, OPTIMIZER_KEYS, path)
        c.choice(spec, "name", OPTIMIZER_NAMES, path)
        for key in ("base_lr", "momentum", "betas", "weight_decay"):
            c.declared(spec, key, path, OptimizerRecipe, required=key == "base_lr")
        if "schedule" in spec:
            c.choice(spec, "schedule", SCHEDULE_NAMES, path)


def _check_train(c: Checker, train: dict, schedules: tuple[type, ...], path: str, extra: frozenset[str] = frozenset(),
                 required: bool = True) -> None:
    """A training section: the keys of its ``schedules`` (``dssl.config.options``: each value an integer in
    its declared range; all present where ``required``), ``extra`` keys, and the step options, one problem
    per bad value."""
    declared = {key: schedule for schedule in reversed(schedules) for key in keys_of(schedule)}
    c.unknown_keys(train, set(declared) | extra | set(STEP_KEYS), path)
    for key in sorted(declared):
        c.declared(train, key, path, declared[key], required=required)
    _check_steps(c, train, path)


def _check_steps(c: Checker, entry: dict, path: str) -> None:
    for key, message in step_problems(entry):
        c.add(f"{path}.{key}", message)


@section_validator
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
    if "image_size" not in DATASET_FACTS.get(dataset, {}) or not isinstance(size, int):
        return
    spec = (c.params.get("datasets") or {}).get(dataset) or {}
    decoded = spec.get("image_size", DATASET_FACTS[dataset]["image_size"])
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


def _check_strategy_entry(c: Checker, spec: dict, path: str) -> None:
    """A ``strategies`` entry: a registered strategy's name and its own options (the keyword arguments
    of its ``__init__``, read from the strategy modules by ``dssl.config.strategies``), plus for DecL
    the round's ``mixing`` rule and ``order``, and ``train``: overrides of the framework's training
    schedule for this entry's cells. Option values are checked when the stage builds the strategy,
    before training."""
    strategies = declared_strategies()
    name = c.choice(spec, "name", strategies, path)
    if name is None:
        return
    c.unknown_keys(spec, {"name", "train", *strategies[name].options, *DECL_ROUND_KEYS}, path)
    for option in strategies[name].options:
        problem = strategies[name].value_problem(option, spec[option]) if option in spec else None
        if problem:
            default = dict(strategies[name].defaults).get(option)
            c.add(f"{path}.{option}", problem, f"strategy {name!r} default: {default!r}")
    if "train" in spec:
        train = c.mapping(spec["train"], f"{path}.train") or {}
        _check_train(c, train, (SCHEDULES["fl"], SCHEDULES["decl"]), f"{path}.train", frozenset({ENTRY_RECIPE_KEY}),
                     required=False)
        if ENTRY_RECIPE_KEY in train:
            _check_optimizer(c, train[ENTRY_RECIPE_KEY], f"{path}.train.{ENTRY_RECIPE_KEY}")
    if "mixing" in spec:
        c.choice(spec, "mixing", MIXING, path)
    if "order" in spec:
        c.choice(spec, "order", ORDERS, path)


def _check_grid_strategies(c: Checker, grid: dict, framework: str, path: str) -> None:
    """Each strategy of a grid runs in the grid's framework; FL entries carry no DecL round keys."""
    entries, strategies = c.params.get("strategies") or {}, declared_strategies()
    for i, name in enumerate(grid.get("strategies") or []):
        spec = entries.get(name) if isinstance(name, str) else None
        declared = strategies.get((spec or {}).get("name")) if isinstance(spec, dict) else None
        if declared is None:
            continue
        where = f"{path}.strategies[{i}]"
        if framework not in declared.frameworks:
            others = sorted(n for n, d in strategies.items() if framework in d.frameworks)
            c.add(where, f"strategy {name!r} ({declared.name}) runs in {', '.join(declared.frameworks)}, "
                         f"not {framework}", f"{framework} strategies: {', '.join(others)}")
        elif framework == "fl" and DECL_ROUND_KEYS & set(spec):
            c.add(where, f"strategy {name!r} sets {sorted(DECL_ROUND_KEYS & set(spec))}, which only DecL uses",
                  "give the FL grid a strategy entry without them")
        elif (isinstance(spec.get("train"), dict)
              and set(spec["train"]) - TRAIN_KEYS[framework] - set(STEP_KEYS) - {ENTRY_RECIPE_KEY}):
            allowed = TRAIN_KEYS[framework] | set(STEP_KEYS) | {ENTRY_RECIPE_KEY}
            c.add(where, f"strategy {name!r} sets train keys {sorted(set(spec['train']) - allowed)}, which {framework} "
                         "training does not have", f"{framework} train keys: {', '.join(sorted(allowed))}")


def graph_partition(params: dict, name: str) -> str | None:
    """The partition whose clients a graph (or an improved graph, through its base) connects."""
    graphs, improved = params.get("graphs") or {}, params.get("improved_graphs") or {}
    seen = set()
    while name in improved and name not in seen:
        seen.add(name)
        name = (improved[name] or {}).get("base")
    return (graphs.get(name) or {}).get("partition")


@section_validator
def check_strategies(c: Checker) -> None:
    """Named strategy configurations: a registry ``name`` plus that strategy's options."""
    for name, path, spec in c.entries("strategies"):
        _check_strategy_entry(c, spec, path)


@section_validator
def check_evaluate(c: Checker) -> None:
    evaluate = c.section("evaluate")
    if not evaluate:
        return
    path = "evaluate"
    c.unknown_keys(evaluate, {"datasets", "random_backbones", "protocols", "grids", "vit_pool", "reestimate_batchnorm",
                              *PROTOCOL_NAMES}, path)
    if "vit_pool" in evaluate:
        c.choice(evaluate, "vit_pool", VIT_POOLS, path)
    if not isinstance(evaluate.get("reestimate_batchnorm", False), bool):
        c.add(f"{path}.reestimate_batchnorm", f"must be true or false, got {evaluate['reestimate_batchnorm']!r}",
              "true: re-estimate a pretrained encoder's BatchNorm statistics before evaluating it (not in paper A)")
    datasets = c.params.get("datasets") or {}
    _downstream_datasets(c, evaluate, path, datasets)
    if "random_backbones" in evaluate:
        _name_list(c, evaluate, "random_backbones", set(backbone_families()), path, "backbones")
    protocols = c.mapping(evaluate.get("protocols"), f"{path}.protocols") or {}
    c.unknown_keys(protocols, FRAMEWORKS, f"{path}.protocols")
    for framework in protocols:
        if framework in FRAMEWORKS and protocols[framework] != []:   # [] = that framework is not evaluated
            _name_list(c, protocols, framework, PROTOCOL_NAMES, f"{path}.protocols", "protocols")
    _check_evaluation_grids(c, evaluate, path, datasets)
    from dssl.config.evaluation_plan import evaluated_protocols

    used = set(evaluated_protocols(c.params))
    for protocol in PROTOCOLS:  # registry order: problems come out in a stable order
        if protocol in evaluate:
            _check_protocol_config(c, evaluate[protocol], protocol, f"{path}.{protocol}")
        elif protocol in used:  # the evaluate stage reads evaluate.<protocol>
            c.add(f"{path}.{protocol}", "missing: the protocol is listed in evaluate.protocols",
                  f"settable keys: {', '.join(sorted(PROTOCOLS[protocol].keys))}")


def _downstream_datasets(c: Checker, entry: dict, path: str, datasets: dict) -> None:
    """``<path>.datasets``: defined datasets that have a test split to score on."""
    for name in _name_list(c, entry, "datasets", datasets, path, "datasets"):
        if name in DATASET_FACTS and not has_test_split(name, datasets.get(name) or {}, c.root):
            c.add(f"{path}.datasets", f"{name} has no test split: every image pretrains (test_fraction 0)",
                  f"set datasets.{name}.test_fraction (e.g. 0.2) to carve one, or evaluate on another dataset")


def _check_evaluation_grids(c: Checker, evaluate: dict, path: str, datasets: dict) -> None:
    """``evaluate.grids.<grid>``: what the table of a pretraining grid reads of its cells (``datasets``,
    ``protocols``; each defaults to the framework's), the grid named in ``pretrain.<fl|decl|local>.grids``."""
    from dssl.config.evaluation_plan import EVALUATION_KEYS
    from dssl.config.grids import named_grids

    grids = c.mapping(evaluate.get("grids", {}), f"{path}.grids") or {}
    known = {name for framework in ("fl", "decl", "local") for name in named_grids(c.params, framework)}
    for name, entry in grids.items():
        where = f"{path}.grids.{name}"
        if name not in known:
            c.add(where, "is not a grid of pretrain.fl, pretrain.decl or pretrain.local",
                  f"one of: {', '.join(sorted(known)) or '(none)'}")
            continue
        entry = c.mapping(entry, where)
        if entry is None:
            continue
        c.unknown_keys(entry, EVALUATION_KEYS, where)
        if not entry:
            c.add(where, "names neither datasets nor protocols", "give datasets: [...] and/or protocols: [...]")
        if "datasets" in entry:
            _downstream_datasets(c, entry, where, datasets)
        if "protocols" in entry:
            _name_list(c, entry, "protocols", PROTOCOL_NAMES, where, "protocols")


def _check_protocol_config(c: Checker, value: object, protocol: str, path: str) -> None:
    """Keys and values of ``evaluate.<protocol>``: the protocol's own config fields, the step options and
    the ``per_family`` / ``per_dataset`` overrides (each config they resolve to is built once)."""
    spec = c.mapping(value, path)
    if spec is None:
        return
    before = len(c.problems)
    keys = PROTOCOLS[protocol].keys
    c.unknown_keys(spec, keys | set(OVERRIDE_KEYS), path)
    c.number(spec, "val_fraction", path, low=0, high=0.5, low_open=True)
    _check_steps(c, spec, path)
    from dssl.config.evaluation_plan import evaluated_datasets

    datasets = [d for d in evaluated_datasets(c.params) if isinstance(d, str)]
    for table, names in (("per_family", FAMILIES), ("per_dataset", datasets)):
        for name, override in (c.mapping(spec.get(table, {}), f"{path}.{table}") or {}).items():
            where = f"{path}.{table}.{name}"
            if name not in names:
                kind = ("backbone family" if table == "per_family"
                        else "dataset an evaluation reads (evaluate.datasets, evaluate.grids)")
                c.add(where, f"{name!r} is not a {kind}",
                      f"one of: {', '.join(names) or '(none)'}")
            elif c.mapping(override, where) is not None:
                c.unknown_keys(override, keys, where)
                _check_steps(c, override, where)
    if len(c.problems) > before:
        return
    for dataset, family in override_names(spec, datasets):   # the config's own value checks, once keys are right
        try:
            PROTOCOLS[protocol].make_config(resolve_overrides(spec, dataset, family))
        except (TypeError, ValueError) as err:
            where = "".join(f" (per_{kind} {name})"
                            for kind, name in (("family", family), ("dataset", dataset)) if name)
            c.add(path + where, str(err), "see the protocol's config class in src/dssl/evaluation/configs.py")
            return


@section_validator
def check_seeds(c: Checker) -> None:
    """``seeds``: the list every training and evaluation cell runs, one MLflow run and folder per seed."""
    _check_seed_list(c, c.params.get("seeds"), "seeds")


def _check_seed_list(c: Checker, seeds: object, path: str) -> bool:
    """A non-empty list of distinct integers >= 0 (the top-level ``seeds`` or a grid's own)."""
    if not isinstance(seeds, list) or not seeds:
        c.add(path, "must be a non-empty list of integers", "e.g. seeds: [0, 1, 2]")
        return False
    bad = [i for i, seed in enumerate(seeds) if not _is_index(seed)]
    for i in bad:
        c.add(f"{path}[{i}]", f"must be an integer >= 0, got {seeds[i]!r}")
    if len(set(map(str, seeds))) != len(seeds):
        c.add(path, "holds a seed twice", "list each seed once")
        return False
    return not bad


def _check_shared_cells(c: Checker, framework: str) -> None:
    """A cell runs one list of seeds: every grid listing it must give it the same one."""
    from dssl.config.grids import all_grid_seed_keys, seeds_at

    if not _seed_lists_valid(c.params):
        return   # reported where the list is
    try:
        lists = {cell: {key: seeds_at(c.params, key) for key in keys}
                 for cell, keys in all_grid_seed_keys(c.params, framework).items()}
    except (AttributeError, KeyError, TypeError, ValueError):   # malformed grids or seeds: reported by their checks
        return
    for cell, by_key in lists.items():
        if len({tuple(sorted(seeds)) for seeds in by_key.values()}) > 1:
            listed = "; ".join(f"{key}: {seeds}" for key, seeds in by_key.items())
            c.add(list(by_key)[-1], f"cell {' / '.join(cell)} is in grids with different seeds ({listed})",
                  "a cell trains one list of seeds: give the grids that share it the same seeds, or list it in one")
            return


IMPROVE_CRITERIA_NAMES = {"sensitivity", "algebraic_connectivity", "min_degree", "random"}


@section_validator
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


@section_validator
def check_report(c: Checker) -> None:
    """Structure only: section names and options are checked against the report's registry by
    ``pipeline.validate`` (the report's code is not part of every stage's lineage)."""
    report = c.section("report")
    if not report:
        return
    c.unknown_keys(report, {"dataset", "sections", "verdicts_elsewhere"}, "report")
    from dssl.config.evaluation_plan import evaluated_datasets

    evaluated = evaluated_datasets(c.params)
    c.name_of(report, "dataset", evaluated, "report", "evaluate.datasets or evaluate.grids")
    sections = c.mapping(report.get("sections", {}), "report.sections")
    for name, options in (sections or {}).items():
        if options is not None and c.mapping(options, f"report.sections.{name}") is not None:
            _check_section_datasets(c, options, f"report.sections.{name}", evaluated)
    elsewhere = (c.mapping(report["verdicts_elsewhere"], "report.verdicts_elsewhere")
                 if "verdicts_elsewhere" in report else None)
    for label, folder in (elsewhere or {}).items():
        path = f"report.verdicts_elsewhere.{label}"
        if not isinstance(folder, str):
            c.add(path, f"must be a folder path, got {folder!r}", "a folder written by `dssl verdicts export`")
        elif not (c.root / folder / "source.json").is_file():
            c.add(path, f"{folder}/source.json does not exist",
                  f"record a finished run's verdicts there: `dssl verdicts export --label {label}`")


def _check_section_datasets(c: Checker, options: dict, path: str, evaluated: list[str]) -> None:
    """A section's ``dataset`` and its columns' (``columns.<label>.dataset``) must be datasets some evaluation
    stage reads, or the section's cells would be empty after the run."""
    named = [(f"{path}.dataset", options.get("dataset"))] if options.get("dataset") is not None else []
    columns = options.get("columns")
    if isinstance(columns, dict):
        named += [(f"{path}.columns.{label}.dataset", spec.get("dataset")) for label, spec in columns.items()
                  if isinstance(spec, dict) and spec.get("dataset") is not None]
    for where, dataset in named:
        if dataset not in evaluated:
            c.add(where, f"{dataset!r} is not evaluated on", f"one of evaluate.datasets or evaluate.grids: "
                                                            f"{', '.join(evaluated) or '(none)'}")


@section_validator
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


@section_validator
def check_weight_distance(c: Checker) -> None:
    """Paper A's Table 5: grids of existing FL cells whose stand-alone cells train ``clients``."""
    section = c.section("weight_distance", required=False)
    if section:
        c.unknown_keys(section, {"clients", "grids"}, "weight_distance")
        _check_local_and_global(c, "weight_distance", "Table 5")


@section_validator
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


def _is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_seed_list(value: object) -> bool:
    """Whether a seeds value is what ``_check_seed_list`` accepts (so a later check may read it)."""
    return (isinstance(value, list) and bool(value) and all(_is_index(seed) for seed in value)
            and len(set(value)) == len(value))


def _seed_lists_valid(params: dict) -> bool:
    """Whether the top-level ``seeds`` and every grid's own are valid: the checks that compare the seeds of
    cells run only then, so that one bad list is one problem line, at its own key path."""
    grids = [grid for framework in ("fl", "decl", "local")
             for grid in ((((params.get("pretrain") or {}).get(framework) or {}).get("grids")) or {}).values()
             if isinstance(grid, dict) and "seeds" in grid]
    return _is_seed_list(params.get("seeds")) and all(_is_seed_list(grid["seeds"]) for grid in grids)


# checkpoint.every_seconds above a day: a hard kill would lose more than a cluster job's usual time limit
MAX_CHECKPOINT_SECONDS = 86400


@section_validator
def check_checkpoint(c: Checker) -> None:
    """How often training and evaluation checkpoint (``dssl.training.preemption.CheckpointInterval``);
    optional: without it, after a round once a minute has passed."""
    section = c.section("checkpoint", required=False)
    if not section:
        return
    c.unknown_keys(section, {"every_rounds", "every_seconds"}, "checkpoint")
    c.number(section, "every_rounds", "checkpoint", integer=True, low=1, high=100000, required=False,
             hint="pretraining checkpoints after every N-th round (1: every round)")
    c.number(section, "every_seconds", "checkpoint", low=0, high=MAX_CHECKPOINT_SECONDS, required=False,
             hint="the least seconds between two routine checkpoints (0: none skipped); a hard kill loses "
                  "at most this much and one round or epoch")


@section_validator
def check_protocol_ranges(c: Checker) -> None:
    """The numbers of ``evaluate.<protocol>`` and of its ``per_family`` / ``per_dataset`` overrides, each
    against the range its protocol's config class declares (``dssl.evaluation.configs``), at its key path."""
    evaluate = c.params.get("evaluate")
    for protocol in PROTOCOLS if isinstance(evaluate, dict) else ():
        spec = evaluate.get(protocol)
        if not isinstance(spec, dict):
            continue
        entries = [(f"evaluate.{protocol}", spec)]
        for table in OVERRIDE_KEYS:
            overrides = spec.get(table)
            entries += [(f"evaluate.{protocol}.{table}.{name}", override)
                        for name, override in (overrides.items() if isinstance(overrides, dict) else ())
                        if isinstance(override, dict)]
        config = PROTOCOLS[protocol].config_class
        settable = set(declared_options(config)) & PROTOCOLS[protocol].keys
        reported = {problem.path for problem in c.problems}
        for path, entry in entries:
            for key in sorted(settable & set(entry)):
                if f"{path}.{key}" not in reported:
                    c.declared(entry, key, path, config)


KNOWN_SECTIONS = {"profile", "seeds", "datasets", "partitions", "graphs", "improved_graphs", "models", "strategies",
                  "pretrain", "evaluate", "report", "theory", "weight_distance", "features",
                  "checkpoint"}


@section_validator
def check_sections(c: Checker) -> None:
    c.unknown_keys(c.params, KNOWN_SECTIONS, "<top level>")

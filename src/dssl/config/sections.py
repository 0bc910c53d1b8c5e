"""Validators of the params.yaml sections, one function per section (registered in order)."""

from __future__ import annotations

import math
from pathlib import Path

from dssl.config.params import Checker, section_validator
from dssl.topology.graphs import TOPOLOGIES, check_request

# Facts the validator needs without importing the data code (which imports torch). A test keeps
# these names equal to the dataset registry's keys.
DATASET_FACTS = {
    "digits": {"num_classes": 10, "train_size": None, "needs_root": False},
    "cifar10": {"num_classes": 10, "train_size": 50000, "needs_root": False},
    "cifar100": {"num_classes": 100, "train_size": 50000, "needs_root": False},
    "mini_imagenet": {"num_classes": 100, "train_size": None, "needs_root": True},
    "imagenet": {"num_classes": 1000, "train_size": None, "needs_root": True},
}
DIGITS_SIZE = 1797  # scikit-learn's load_digits

DATASET_KEYS = {
    "digits": {"test_fraction", "split_seed"},
    "cifar10": {"root"},
    "cifar100": {"root"},
    "mini_imagenet": {"root", "image_size", "test_fraction", "split_seed"},
    "imagenet": {"root", "image_size"},
}

COMMON_PARTITION_KEYS = {"dataset", "scheme", "clients", "seed"}
PARTITION_SCHEME_KEYS = {
    "iid": set(),
    "dirichlet_balanced": {"alpha", "sinkhorn_iters"},
    "dirichlet_min_size": {"alpha", "min_size"},
    "k_classes": {"classes_per_client"},
    "feature": {"augment"},
}
GRAPH_KEYS = {"partition", "topology", "connectivity", "seed"}


def dataset_train_size(name: str, spec: dict) -> int | None:
    """Training-split size known without loading the data (None when it needs a folder scan)."""
    if name == "digits":
        test_fraction = spec.get("test_fraction", 0.25)
        return DIGITS_SIZE - math.ceil(test_fraction * DIGITS_SIZE)
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
            c.number(spec, "test_fraction", path, low=0, high=0.9, low_open=True)
        if "image_size" in spec:
            c.number(spec, "image_size", path, integer=True, low=8)
        if DATASET_FACTS[name]["needs_root"]:
            _check_root(c, spec, path, name)


def _check_root(c: Checker, spec: dict, path: str, name: str) -> None:
    root = spec.get("root")
    layout = "<root>/train/<class>/<image files>" + (" and <root>/val/<class>/..." if name == "imagenet" else "")
    if not root:
        c.add(f"{path}.root", "missing", f"the folder holding {name} as {layout}")
        return
    folder = Path(root) if Path(root).is_absolute() else c.root / root
    if not (folder / "train").is_dir():
        c.add(f"{path}.root", f"{folder} has no train/ folder", f"expected layout: {layout}")


@section_validator
def check_partitions(c: Checker) -> None:
    datasets = c.params.get("datasets") or {}
    for name, spec in c.section("partitions").items():
        path = f"partitions.{name}"
        spec = c.mapping(spec, path)
        if spec is None:
            continue
        scheme = c.choice(spec, "scheme", PARTITION_SCHEME_KEYS, path)
        if scheme is not None:
            c.unknown_keys(spec, COMMON_PARTITION_KEYS | PARTITION_SCHEME_KEYS[scheme], path)
        dataset = c.name_of(spec, "dataset", datasets, path, "datasets")
        clients = c.number(spec, "clients", path, integer=True, low=1, hint="number of clients, >= 1")
        c.number(spec, "seed", path, integer=True, low=0)
        if dataset in DATASET_FACTS and clients is not None:
            size = dataset_train_size(dataset, datasets.get(dataset) or {})
            if size is not None and clients > size:
                c.add(f"{path}.clients", f"{clients} clients but {dataset} has only {size} training samples",
                      "use fewer clients")
        if scheme in ("dirichlet_balanced", "dirichlet_min_size"):
            c.number(spec, "alpha", path, low=0, low_open=True, hint="Dirichlet concentration > 0; 1e5 ~ IID")
        if scheme == "dirichlet_balanced" and "sinkhorn_iters" in spec:
            c.number(spec, "sinkhorn_iters", path, integer=True, low=1)
        if scheme == "dirichlet_min_size" and "min_size" in spec:
            c.number(spec, "min_size", path, integer=True, low=1)
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
    per_client = c.number(spec, "classes_per_client", path, integer=True, low=1)
    if per_client is not None and dataset in DATASET_FACTS:
        num_classes = DATASET_FACTS[dataset]["num_classes"]
        if per_client > num_classes:
            c.add(f"{path}.classes_per_client", f"{per_client} > the {num_classes} classes of {dataset}")


@section_validator
def check_graphs(c: Checker) -> None:
    partitions = c.params.get("partitions") or {}
    for name, spec in c.section("graphs", required=False).items():
        path = f"graphs.{name}"
        spec = c.mapping(spec, path)
        if spec is None:
            continue
        c.unknown_keys(spec, GRAPH_KEYS, path)
        partition = c.name_of(spec, "partition", partitions, path, "partitions")
        topology = c.choice(spec, "topology", TOPOLOGIES, path)
        c.number(spec, "seed", path, integer=True, low=0)
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
        connectivity = c.number(spec, "connectivity", path, hint=f"mean |A_i| incl. self, in 2..{clients}")
        if connectivity is not None:
            for message in check_request(topology, clients, connectivity):
                c.add(f"{path}.connectivity", message, f"partition '{partition}' has N = {clients} clients")

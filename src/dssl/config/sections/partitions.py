"""``partitions``: a scheme with its own keys, over a defined dataset, with no more clients than samples."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.config.dataset_facts import DATASET_FACTS, dataset_train_size
from dssl.config.options import PartitionOptions


COMMON_PARTITION_KEYS = {"dataset", "scheme", "clients", "seed"}
PARTITION_SCHEME_KEYS = {
    "iid": set(),
    "dirichlet_balanced": {"alpha", "sinkhorn_iters", "rounding"},
    "dirichlet_min_size": {"alpha", "min_size"},
    "k_classes": {"classes_per_client"},
    "feature": {"augment"},
}


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

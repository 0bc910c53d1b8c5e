"""``partitions``: a scheme with the options its spec declares (``dssl.data.partition_specs``), over a defined
dataset, with no more clients than samples."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.config.sections.spec_options import check_options, check_unknown
from dssl.data.dataset_specs import DATASET_SPECS  # standard library only
from dssl.data.partition_specs import PARTITION_SCHEMES, PartitionEntry  # standard library only


def check_partitions(c: Checker) -> None:
    """Each partition: a known scheme with the keys its spec declares, a defined dataset with enough training
    samples for its clients, and no more classes per client than the dataset has."""
    datasets = c.params.get("datasets") or {}
    for name, path, spec in c.entries("partitions"):
        scheme = c.choice(spec, "scheme", PARTITION_SCHEMES.names(), path)
        options = PARTITION_SCHEMES[scheme].options if scheme is not None else None
        if options is not None:
            check_unknown(c, spec, path, PartitionEntry, options)
        dataset = c.name_of(spec, "dataset", datasets, path, "datasets")
        entry = check_options(c, spec, path, PartitionEntry, skip=("dataset", "scheme"))
        _check_client_count(c, entry.get("clients"), dataset, datasets, path)
        if options is None:
            continue
        chosen = check_options(c, spec, path, options)
        if "classes_per_client" in chosen and dataset in DATASET_SPECS:
            _check_classes(c, chosen["classes_per_client"], dataset, path)


def _check_client_count(c: Checker, clients: int | None, dataset: str | None, datasets: dict, path: str) -> None:
    if dataset not in DATASET_SPECS or clients is None or not isinstance(datasets, dict):
        return
    size = DATASET_SPECS[dataset].train_size(datasets.get(dataset) or {})
    if size is not None and clients > size:
        c.add(f"{path}.clients", f"{clients} clients but {dataset} has only {size} training samples",
              "use fewer clients")


def _check_classes(c: Checker, per_client: int, dataset: str, path: str) -> None:
    num_classes = DATASET_SPECS[dataset].num_classes
    if per_client > num_classes:
        c.add(f"{path}.classes_per_client", f"{per_client} > the {num_classes} classes of {dataset}")

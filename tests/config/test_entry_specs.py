"""Datasets, partition schemes and topologies are declared once, as specs: the validator knows an entry's keys,
types and ranges only through its spec's config dataclass, and the data code takes its names and defaults from
the same spec. A bad option exits ``dssl validate`` with status 2 naming its key path and range."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated

import pytest

from dssl.config.params import validate
from dssl.config.ranges import Range, declared_options
from dssl.config.sections import datasets as dataset_section
from dssl.config.sections import graphs as graph_section
from dssl.config.sections import partitions as partition_section
from dssl.data.dataset_specs import DATASET_SPECS, DatasetSpec
from dssl.data.partition_specs import PARTITION_SCHEMES, PartitionScheme
from dssl.registry import Registry
from dssl.topology.topology_specs import TOPOLOGY_SPECS, RandomGraphOptions, TopologySpec

from conftest import problems_at, set_at, validate_error_lines

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("where, value, expected", [
    ("datasets.digits.test_fraction", 0.95, "must be <= 0.9, got 0.95  (hint: test_fraction: (0, 0.9])"),
    ("partitions.fl-label.sinkhorn_iters", 0, "must be >= 1, got 0  (hint: sinkhorn_iters: [1, 100000])"),
    ("graphs.general-3.connectivity", 1e9, "must be <= 100000, got 1000000000.0"),
])
def test_the_cli_refuses_a_bad_option_at_its_key_path_with_its_range(good: dict, tmp_path: Path, where: str,
                                                                      value: object, expected: str) -> None:
    set_at(good, where, value)
    lines = validate_error_lines(good, tmp_path)
    assert len(lines) == 1 and f"{where}: {expected}" in lines[0], lines


@pytest.mark.parametrize("where, value, message", [
    ("datasets.digits.test_fraction", "abc", "must be a number, got 'abc'"),
    ("datasets.digits.test_fraction", None, "must be a number, got null"),
    ("datasets.cifar10.verify_md5", "yes", "must be true or false, got 'yes'"),
    ("partitions.fl-label.rounding", "ceil", "unknown value 'ceil'"),
    ("partitions.fl-feature.augment.flip_p", 1.5, "must be <= 1, got 1.5"),
    ("partitions.fl-feature.augment.hue", 0.1, "unknown key"),
    ("graphs.complete.connectivity", 5, "the complete graph has connectivity N = 6"),
])
def test_each_option_kind_is_checked_from_its_spec(good: dict, where: str, value: object, message: str) -> None:
    set_at(good, where, value)
    problems = {p.path: p.message for p in validate(good, REPO)}
    assert problems.get(where) == message, problems


@dataclass(frozen=True)
class _StripesOptions:
    """A scheme that exists only in this test."""

    width: Annotated[int, Range(1, 8)] = 2


@dataclass(frozen=True)
class _TinyOptions:
    """A dataset that exists only in this test."""

    side: Annotated[int, Range(4, 16)] = 8


def _with(registry: Registry, entry: object) -> Registry:
    extended = Registry(registry.kind)
    for name in registry.names():
        extended.register(name)(registry[name])
    extended.register(entry.name)(entry)
    return extended


def test_a_new_scheme_is_known_to_the_validator_through_its_spec_alone(good: dict, monkeypatch) -> None:
    stripes = PartitionScheme("stripes", _StripesOptions, "split_stripes")
    monkeypatch.setattr(partition_section, "PARTITION_SCHEMES", _with(PARTITION_SCHEMES, stripes))
    good["partitions"]["fl-iid"] = {"dataset": "digits", "scheme": "stripes", "clients": 4, "seed": 0, "width": 3}
    assert "partitions.fl-iid.width" not in problems_at(good)
    good["partitions"]["fl-iid"]["width"] = 9
    assert problems_at(good)["partitions.fl-iid.width"].startswith("partitions.fl-iid.width: must be <= 8, got 9")
    del good["partitions"]["fl-iid"]["width"]
    good["partitions"]["fl-iid"]["height"] = 3
    assert "allowed keys: clients, dataset, scheme, seed, width" in problems_at(good)["partitions.fl-iid.height"]


def test_a_new_dataset_is_known_to_the_validator_through_its_spec_alone(good: dict, monkeypatch) -> None:
    tiny = DatasetSpec("tiny", _TinyOptions, "a dataset of this test", 3, "data.digits")
    monkeypatch.setattr(dataset_section, "DATASET_SPECS", _with(DATASET_SPECS, tiny))
    good["datasets"]["tiny"] = {"side": 12}
    assert not [p for p in problems_at(good) if p.startswith("datasets.tiny")]
    good["datasets"]["tiny"] = {"side": 2, "depth": 1}
    problems = problems_at(good)
    assert problems["datasets.tiny.side"] == "datasets.tiny.side: must be >= 4, got 2  (hint: side: [4, 16])"
    assert problems["datasets.tiny.depth"] == "datasets.tiny.depth: unknown key  (hint: allowed keys: side)"


def test_a_new_topology_is_known_to_the_validator_through_its_spec_alone(good: dict, monkeypatch) -> None:
    ring = TopologySpec("ring", RandomGraphOptions, "draw_ring")
    monkeypatch.setattr(graph_section, "TOPOLOGY_SPECS", _with(TOPOLOGY_SPECS, ring))
    good["graphs"]["ring"] = {"partition": "decl-label", "topology": "ring", "connectivity": 0.5, "seed": 0}
    assert problems_at(good)["graphs.ring.connectivity"].startswith("graphs.ring.connectivity: must be >= 1, got 0.5")
    good["graphs"]["ring"]["hops"] = 2
    assert "graphs.ring.hops" in problems_at(good)


def test_the_data_code_reads_names_and_defaults_from_the_specs() -> None:
    from dssl.data.datasets import DATASETS
    from dssl.data.partition import PARTITIONERS, create_partition
    from dssl.topology.graphs import TOPOLOGIES

    assert DATASETS.names() == DATASET_SPECS.names() and PARTITIONERS is PARTITION_SCHEMES
    assert TOPOLOGIES is TOPOLOGY_SPECS
    for name in DATASET_SPECS.names():
        assert dict(DATASETS[name].defaults) == {f.name: DATASET_SPECS[name].defaults()[f.name]
                                                 for f in fields(DATASET_SPECS[name].options)}
    labels = [0, 1] * 20
    partition = create_partition(labels, {"scheme": "dirichlet_balanced", "clients": 4, "alpha": 1.0}, seed=0)
    assert partition.spec["sinkhorn_iters"] == PARTITION_SCHEMES["dirichlet_balanced"].defaults()["sinkhorn_iters"]
    for spec in PARTITION_SCHEMES.values():
        assert callable(spec.split())
    for spec in TOPOLOGY_SPECS.values():
        assert callable(spec.draw())


def test_every_numeric_option_of_a_spec_has_a_range() -> None:
    for registry in (DATASET_SPECS, PARTITION_SCHEMES, TOPOLOGY_SPECS):
        for spec in registry.values():
            ranged = declared_options(spec.options)
            for field in fields(spec.options):
                if any(t in str(field.type) for t in ("int", "float")):
                    assert field.name in ranged, (spec.name, field.name)

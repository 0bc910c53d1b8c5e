"""Lookups across params sections and registries, torch-free: a backbone's family (from its spec,
``dssl.config.backbones``) and the partition a graph connects (through an improved graph's base). The validator,
the stage catalogue and the stages resolve these names here alike."""

from __future__ import annotations

from dssl.config.backbones import BACKBONE_SPECS  # standard library only: the specs, not the architectures


def backbone_family(backbone: str) -> str:
    """'vit' or 'cnn' (``dssl.config.backbones.FAMILIES``), as the backbone's spec declares it: selects the
    optimizer recipe (paper A, https://openreview.net/forum?id=c3yt5VSZPQ, trains ViTs with AdamW, CNNs with SGD)
    and an evaluation protocol's ``per_family`` overrides. An unknown name raises ``UnknownNameError``."""
    return BACKBONE_SPECS[backbone].family


def backbone_families() -> dict[str, str]:
    """Every backbone name -> its family, read from the specs (torch-free)."""
    return {name: BACKBONE_SPECS[name].family for name in BACKBONE_SPECS.names()}


def graph_partition(params: dict, name: str) -> str | None:
    """The partition whose clients a graph (or an improved graph, through its base) connects."""
    graphs, improved = params.get("graphs") or {}, params.get("improved_graphs") or {}
    seen = set()
    while name in improved and name not in seen:
        seen.add(name)
        name = (improved[name] or {}).get("base")
    return (graphs.get(name) or {}).get("partition")

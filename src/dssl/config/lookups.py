"""Lookups across params sections and registries, torch-free: a backbone's family (from its
``@register_backbone`` declaration) and the partition a graph connects (through an improved graph's
base). The validator, the stage catalogue and the stages resolve these names here alike."""

from __future__ import annotations

from dssl.registry import UnknownNameError, entry_options


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


def graph_partition(params: dict, name: str) -> str | None:
    """The partition whose clients a graph (or an improved graph, through its base) connects."""
    graphs, improved = params.get("graphs") or {}, params.get("improved_graphs") or {}
    seen = set()
    while name in improved and name not in seen:
        seen.add(name)
        name = (improved[name] or {}).get("base")
    return (graphs.get(name) or {}).get("partition")

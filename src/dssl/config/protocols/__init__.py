"""The evaluation protocols, declared once (registry ``PROTOCOL_SPECS``): one torch-free module per protocol, named
after it.

Module ``<name>.py`` sets ``SPEC = ProtocolSpec("<name>", <Config>, "evaluation.<module>:evaluate", fixed)``. The
config dataclass (``dssl.evaluation.configs``: the protocols share the step options) holds the keys a params file may
set under ``evaluate.<protocol>``, each with its type, its default and, for a number, its valid range; ``fixed`` holds
the values a protocol's name stands for (``linear_probe_1pct``: ``label_fraction`` 0.01), which a params file cannot
set, so a result's protocol name always says what was run. One function may implement several protocols (the
few-shot probe is both ``linear_probe_10pct`` and ``linear_probe_1pct``). The params validator reads the names, keys
and ranges from here without importing torch or an implementation; a protocol's function is imported when it first
runs (``ProtocolSpec.load``), so an evaluation stage's code lineage holds the spec and implementing modules of the
protocols it runs alone (``dssl.registry.SpecRegistry``): a fix to fine-tuning re-runs the fine-tuning evaluations.

A protocol's params entry may hold overrides for some downstream datasets and backbone families: ``per_family: {vit:
{...}, cnn: {...}}`` and ``per_dataset: {imagenet: {...}}`` (paper A, https://openreview.net/forum?id=c3yt5VSZPQ,
fine-tunes ViTs with MAE's recipe and CNNs with SGD; 50 epochs on CIFAR-10, 100 on CIFAR-100).
``ProtocolSpec.make_config(entry, dataset, family)`` resolves them: the entry, then its family's overrides, then its
dataset's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from dssl.registry import SpecRegistry
from dssl.specs import EntrySpec

__all__ = ["ProtocolSpec", "PROTOCOL_SPECS", "OVERRIDE_KEYS", "coerce_config", "resolve_overrides",
           "override_names"]

OVERRIDE_KEYS = ("per_family", "per_dataset")

C = TypeVar("C")


def coerce_config(cls: type[C], config: C | Mapping[str, Any] | None) -> C:
    """A protocol config from a dataclass instance, a params mapping (lists become tuples) or None."""
    if config is None:
        return cls()
    if isinstance(config, cls):
        return config
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(config) - known
    if unknown:
        raise TypeError(f"unknown {cls.__name__} keys {sorted(unknown)}; known: {sorted(known)}")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})


def resolve_overrides(entry: Mapping[str, Any], dataset: str | None, family: str | None) -> dict[str, Any]:
    """``entry`` without its override tables, updated by ``per_family[family]`` then ``per_dataset[dataset]``."""
    resolved = {k: v for k, v in entry.items() if k not in OVERRIDE_KEYS}
    for table, name in (("per_family", family), ("per_dataset", dataset)):
        resolved.update(((entry.get(table) or {}).get(name) or {}) if name is not None else {})
    return resolved


def override_names(entry: Mapping[str, Any], datasets: Sequence[str]) -> list[tuple[str | None, str | None]]:
    """Every (dataset, family) whose resolved config may differ: what a validator builds once each."""
    families = [None, *((entry.get("per_family") or {}) if isinstance(entry.get("per_family"), Mapping) else [])]
    return [(dataset, family) for dataset in (None, *datasets) for family in families]


@dataclass(frozen=True)
class ProtocolSpec(EntrySpec):
    """An evaluation protocol: its name, its config dataclass, its ``evaluate(encoder, train, test, config, seed,
    checkpoint)`` function, and ``fixed``, the config values its name stands for (not settable)."""

    kind: ClassVar[str] = "protocol"

    fixed: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def keys(self) -> frozenset[str]:
        """The config keys a params file may set for this protocol (besides ``OVERRIDE_KEYS``)."""
        return frozenset(f.name for f in dataclasses.fields(self.config)) - set(self.fixed)

    def make_config(self, config: Any = None, dataset: str | None = None, family: str | None = None) -> Any:
        """The config to run with, from an instance of ``config``, a params mapping or None; a mapping's
        ``per_family`` / ``per_dataset`` overrides for ``family`` and ``dataset`` are applied.

        Raises ``TypeError`` for unknown or fixed keys and ``ValueError`` for bad values.
        """
        if isinstance(config, Mapping):
            config = resolve_overrides(config, dataset, family)
        if type(config) is self.config:
            clashes = {k: getattr(config, k) for k, v in self.fixed.items() if getattr(config, k) != v}
            if clashes:
                raise ValueError(f"protocol {self.name!r} fixes {dict(self.fixed)}, got {clashes}")
            return config
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"protocol {self.name!r} takes a {self.config.__name__} or a mapping, "
                            f"got {type(config).__name__}")
        given = dict(config or {})
        fixed_given = sorted(set(given) & set(self.fixed))
        if fixed_given:
            raise TypeError(f"protocol {self.name!r} fixes {fixed_given} by its name; "
                            f"settable keys: {sorted(self.keys)}")
        return coerce_config(self.config, {**self.fixed, **given})

    def options(self, values: dict[str, Any] | None = None) -> Any:
        """The config of a params entry's values (``make_config``: the values the name fixes included)."""
        return self.make_config(values)

    def __call__(self, encoder: Any, train: Any, test: Any, config: Any = None, seed: int = 0,
                 checkpoint: Any = None) -> dict[str, Any]:
        """Run the protocol; the result's ``protocol`` is this registry name. ``checkpoint``: an
        ``evaluation.progress.Checkpoint`` the training protocols save to and resume from (None: none)."""
        evaluate: Callable[..., dict[str, Any]] = self.load()
        result = evaluate(encoder, train, test, self.make_config(config), seed, checkpoint)
        return {**result, "protocol": self.name}


PROTOCOL_SPECS: SpecRegistry[ProtocolSpec] = SpecRegistry.of("protocol")

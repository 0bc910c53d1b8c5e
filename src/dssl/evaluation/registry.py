"""The evaluation protocols by name: each name is an implementation plus the config values it fixes.

A protocol is declared once, on the function that implements it: ``@register_protocol("knn",
config="KnnConfig")`` on ``dssl.evaluation.knn.evaluate`` (a few-shot probe fixes values by its name:
``@register_protocol("linear_probe_1pct", config="FewShotConfig", label_fraction=0.01)``). ``PROTOCOLS``
holds a torch-free :class:`Protocol` spec per declaration, read from the modules' syntax trees
(``dssl.registry.declarations``), so the params validator takes the names, config classes and allowed
keys from here without importing torch or an implementation. The implementing module is imported when a
protocol first runs (``IMPLEMENTATIONS``, a lazy ``Registry``); the code manifests follow the same split
(``dssl.pipeline.codedeps``): an evaluation stage depends on the modules of the protocols it runs
(``protocol/<name>`` components), so a fix to fine-tuning re-runs the fine-tuning evaluations alone.

A protocol's params entry (``evaluate.<protocol>``) may hold overrides for some downstream datasets and
backbone families: ``per_family: {vit: {...}, cnn: {...}}`` and ``per_dataset: {imagenet: {...}}``
(paper A fine-tunes ViTs with MAE's recipe and CNNs with SGD; 50 epochs on CIFAR-10, 100 on CIFAR-100).
``Protocol.make_config(entry, dataset, family)`` resolves them: the entry, then its family's
overrides, then its dataset's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from dssl.evaluation import configs
from dssl.evaluation.configs import coerce_config
from dssl.registry import Registry, component_module, entry_options


# Backbone families (``dssl.config.lookups.backbone_family``): which per_family entry a model reads.
FAMILIES = ("cnn", "vit")
OVERRIDE_KEYS = ("per_family", "per_dataset")


@dataclass(frozen=True)
class Protocol:
    """A named protocol: the function declared ``@register_protocol(name, ...)`` in
    ``dssl.evaluation.<module>``, run with ``config_class``.

    ``fixed`` holds config values the name stands for (``linear_probe_1pct``: ``label_fraction``
    0.01); a params file cannot set them, so a result's protocol name always says what was run.
    """

    name: str
    module: str
    config_class: type
    fixed: Mapping[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> frozenset[str]:
        """The config keys a params file may set for this protocol (besides ``OVERRIDE_KEYS``)."""
        return frozenset(f.name for f in dataclasses.fields(self.config_class)) - set(self.fixed)

    def make_config(self, config: Any = None, dataset: str | None = None, family: str | None = None) -> Any:
        """The config to run with, from an instance of ``config_class``, a params mapping or None; a
        mapping's ``per_family`` / ``per_dataset`` overrides for ``family`` and ``dataset`` are applied.

        Raises ``TypeError`` for unknown or fixed keys and ``ValueError`` for bad values.
        """
        if isinstance(config, Mapping):
            config = resolve_overrides(config, dataset, family)
        if type(config) is self.config_class:
            clashes = {k: getattr(config, k) for k, v in self.fixed.items() if getattr(config, k) != v}
            if clashes:
                raise ValueError(f"protocol {self.name!r} fixes {dict(self.fixed)}, got {clashes}")
            return config
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"protocol {self.name!r} takes a {self.config_class.__name__} or a mapping, "
                            f"got {type(config).__name__}")
        given = dict(config or {})
        fixed_given = sorted(set(given) & set(self.fixed))
        if fixed_given:
            raise TypeError(f"protocol {self.name!r} fixes {fixed_given} by its name; "
                            f"settable keys: {sorted(self.keys)}")
        return coerce_config(self.config_class, {**self.fixed, **given})

    @property
    def implementation(self) -> Callable[..., dict[str, Any]]:
        """The declared function; its module is imported on first use."""
        return IMPLEMENTATIONS[self.name]

    def __call__(self, encoder: Any, train: Any, test: Any, config: Any = None, seed: int = 0,
                 checkpoint: Any = None) -> dict[str, Any]:
        """Run the protocol; the result's ``protocol`` is this registry name. ``checkpoint``: an
        ``evaluation.progress.Checkpoint`` the training protocols save to and resume from (None: none)."""
        result = self.implementation(encoder, train, test, self.make_config(config), seed, checkpoint)
        return {**result, "protocol": self.name}


# The functions behind the protocols, imported by name when a protocol runs.
IMPLEMENTATIONS: Registry[Callable[..., dict[str, Any]]] = Registry.lazy("protocol")


def register_protocol(name: str, config: str, **fixed: Any) -> Callable[[Callable], Callable]:
    """Decorator: declare the decorated ``evaluate(encoder, train, test, config, seed, checkpoint)`` as protocol
    ``name``, run with ``dssl.evaluation.configs.<config>``; ``fixed``: config values the name stands for.
    Both are literals: ``PROTOCOLS`` reads them from the source, without importing the module."""
    def register(function: Callable) -> Callable:
        return IMPLEMENTATIONS.register(name)(function)

    return register


def _declared_protocols() -> Registry[Protocol]:
    """A :class:`Protocol` per ``@register_protocol`` declaration, sorted by name (torch-free)."""
    protocols: Registry[Protocol] = Registry("protocol")
    for name, options in sorted(entry_options("protocol").items()):
        fixed = {key: value for key, value in options.items() if key != "config"}
        config_class = getattr(configs, str(options["config"]))
        module = component_module("protocol", name).rpartition(".")[2]
        protocols.register(name)(Protocol(name, module, config_class, fixed))
    return protocols


PROTOCOLS: Registry[Protocol] = _declared_protocols()


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

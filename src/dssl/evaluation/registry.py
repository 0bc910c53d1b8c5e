"""The evaluation protocols by name: each name is an implementation plus the config values it fixes.

Reading this registry imports neither torch nor the implementations (they load on first call), so the
params validator can take the protocol names and their allowed keys from here. An implementation is
named by its module inside this package (``"linear_probe"``), not by its full dotted name: the code
manifests (``dssl.pipeline.codedeps``) count a full module name as an import, and every stage reads
this registry through the validator, while only the evaluation stages run a protocol (they import the
implementations themselves, ``dssl.pipeline.evaluate``). So a fix to the linear probe re-runs the
evaluations, not the pretraining.

A protocol's params entry (``evaluate.<protocol>``) may hold overrides for some downstream datasets and
backbone families: ``per_family: {vit: {...}, cnn: {...}}`` and ``per_dataset: {imagenet: {...}}``
(paper A fine-tunes ViTs with MAE's recipe and CNNs with SGD; 50 epochs on CIFAR-10, 100 on CIFAR-100).
``Protocol.make_config(entry, dataset, family)`` resolves them: the entry, then its family's
overrides, then its dataset's.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from dssl.evaluation.configs import FewShotConfig, FineTuneConfig, KnnConfig, LinearProbeConfig, coerce_config


# Backbone families (``dssl.config.sections.backbone_family``): which per_family entry a model reads.
FAMILIES = ("cnn", "vit")
OVERRIDE_KEYS = ("per_family", "per_dataset")


@dataclass(frozen=True)
class Protocol:
    """A named protocol: ``dssl.evaluation.<module>.evaluate`` run with ``config_class``.

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
        return importlib.import_module(f"{__package__}.{self.module}").evaluate

    def __call__(self, encoder: Any, train: Any, test: Any, config: Any = None, seed: int = 0,
                 checkpoint: Any = None) -> dict[str, Any]:
        """Run the protocol; the result's ``protocol`` is this registry name. ``checkpoint``: an
        ``evaluation.progress.Checkpoint`` the training protocols save to and resume from (None: none)."""
        result = self.implementation(encoder, train, test, self.make_config(config), seed, checkpoint)
        return {**result, "protocol": self.name}


def _by_name(*protocols: Protocol) -> dict[str, Protocol]:
    return {p.name: p for p in protocols}


PROTOCOLS: dict[str, Protocol] = _by_name(
    Protocol("linear_probe", "linear_probe", LinearProbeConfig),
    Protocol("finetune", "finetune", FineTuneConfig),
    Protocol("knn", "knn", KnnConfig),
    # Paper B's semi-supervised setting (1 % and 10 % of the labels, head only).
    Protocol("linear_probe_10pct", "few_shot", FewShotConfig, {"label_fraction": 0.1}),
    Protocol("linear_probe_1pct", "few_shot", FewShotConfig, {"label_fraction": 0.01}),
)


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

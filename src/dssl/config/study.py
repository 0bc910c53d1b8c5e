"""The study a validated params file describes, read once into frozen, typed objects.

``params.yaml`` is a nested mapping; the stages, the stage catalogue, the plan and the repro runner each
need the same few facts from it: a model's method, backbone and backbone family, a strategy entry's
layout (its registry name and own options apart from the entry's ``train``, ``mixing`` and ``order``),
the schedule a cell trains with (the framework's ``train`` section with its strategy entry's ``train``
overrides) and the optimizer recipe it uses. ``Study.from_params`` reads them once, after validation;
each of these merges and lookups is written here and nowhere else (the dataset's view defaults under a
model's ``hparams`` are the data layer's: ``pipeline.pretrain.method_hparams`` adds them).
Every mapping it exposes is read-only (``types.MappingProxyType``, lists as tuples; ``thawed`` gives a
plain, mutable copy as the YAML held it), so nothing downstream can change what another reader sees.

Torch-free, standard library and ``dssl.config`` only: the catalogue reads it at Snakemake's parse time.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping

from dssl.config.grids import TOP_LEVEL_SEEDS, grid_cells, local_cells, seeds_at, seeds_keys
from dssl.config.lookups import backbone_family

# The layout of a ``strategies`` entry: the keys that belong to the entry, not to its strategy's options.
DECL_ROUND_KEYS = ("mixing", "order")   # the DecL round's consensus rule and order
ENTRY_KEYS = ("name", "train", *DECL_ROUND_KEYS)
ENTRY_RECIPE_KEY = "optimizer"          # an entry's ``train`` may replace the model's optimizer recipe
FRAMEWORKS = ("fl", "decl", "central", "local")
MAPPINGS = (dict, MappingProxyType)   # what a YAML or frozen mapping is (cheaper to test than typing.Mapping)


def frozen(value: Any) -> Any:
    """A read-only deep copy of a YAML value: mappings as ``MappingProxyType``, lists as tuples."""
    if isinstance(value, MAPPINGS):
        return MappingProxyType({key: frozen(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen(item) for item in value)
    return value


def thawed(value: Any) -> Any:
    """A plain, mutable deep copy of a ``frozen`` value, equal to what the YAML held (dicts and lists)."""
    if isinstance(value, MAPPINGS):
        return {key: thawed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thawed(item) for item in value]
    return value


@dataclass(frozen=True)
class ModelSpec:
    """A ``models`` entry: the SSL ``method`` and ``backbone`` it pairs (registry names), the backbone's
    ``family`` (``vit`` or ``cnn``, as the backbone's spec declares it, ``dssl.config.backbones``: it picks the
    optimizer recipe and a protocol's per-family overrides) and the model's own method ``hparams`` (without the
    pretraining dataset's view defaults, which the stage adds: ``pipeline.pretrain.method_hparams``)."""

    name: str
    method: str
    backbone: str
    family: str
    hparams: Mapping[str, Any]

    @classmethod
    def from_entry(cls, name: str, spec: Mapping[str, Any]) -> ModelSpec:
        return cls(name, str(spec["method"]), str(spec["backbone"]), backbone_family(spec["backbone"]),
                   frozen(spec.get("hparams") or {}))

    @classmethod
    def from_params(cls, params: Mapping[str, Any], name: str) -> ModelSpec:
        """One model, without reading the rest of the study (the catalogue asks per cell)."""
        return cls.from_entry(name, params["models"][name])


@dataclass(frozen=True)
class StrategyEntry:
    """A named ``strategies`` entry: ``registry``, the registered strategy it configures (``t2-fedu`` ->
    ``fedu``), and ``options``, the keyword arguments that strategy is built with (every key that is not
    one of ``ENTRY_KEYS``); ``train``, its overrides of the framework's training schedule for its cells
    (empty when it has none); ``mixing`` and ``order``, the DecL round's consensus rule and order where
    it sets them (None: the round's defaults)."""

    name: str
    registry: str
    options: Mapping[str, Any]
    train: Mapping[str, Any]
    mixing: str | None = None
    order: str | None = None

    @classmethod
    def from_spec(cls, name: str, spec: Mapping[str, Any]) -> StrategyEntry:
        return cls(name, str(spec["name"]), frozen({k: v for k, v in spec.items() if k not in ENTRY_KEYS}),
                   frozen(spec.get("train") or {}), spec.get("mixing"), spec.get("order"))

    @classmethod
    def from_params(cls, params: Mapping[str, Any], name: str) -> StrategyEntry:
        """One entry, without reading the rest of the study (the catalogue asks per cell)."""
        return cls.from_spec(name, params["strategies"][name])

    @property
    def round_options(self) -> Mapping[str, str]:
        """The DecL round's keys the entry sets (``mixing``, ``order``), the others left to their defaults."""
        return MappingProxyType({key: getattr(self, key) for key in DECL_ROUND_KEYS if getattr(self, key) is not None})

    @property
    def optimizer(self) -> Mapping[str, Any] | None:
        """The optimizer recipe its ``train.optimizer`` gives its cells (a baseline trained with its authors'
        recipe), or None: the model's family recipe."""
        return self.train.get(ENTRY_RECIPE_KEY)


@dataclass(frozen=True)
class GridCell:
    """One pretraining cell: its ``framework``, ``model``, ``place`` (the partition of an FL or stand-alone
    cell, the graph of a DecL cell, None for central), ``strategy`` entry (FL, DecL; else None) and the
    seeds it trains with the params key that declares them (``config.grids``: a grid's own or the
    top-level ``seeds``)."""

    framework: str
    model: str
    place: str | None
    strategy: str | None
    seeds_key: str
    seeds: tuple[int, ...]


@dataclass(frozen=True)
class Study:
    """A validated params file's pretraining study: ``models`` and ``strategies`` by name, each
    framework's ``train`` section (``pretrain.<framework>.train``, present frameworks only), the
    optimizer recipe of each backbone family (``pretrain.optimizers``), the pretraining ``dataset``
    and ``image_size``, the top-level ``seeds``, and ``source``: the sections the grids and their seeds
    are read from (``pretrain`` and ``seeds``), read-only; ``cells`` reads them when first asked."""

    models: Mapping[str, ModelSpec]
    strategies: Mapping[str, StrategyEntry]
    trains: Mapping[str, Mapping[str, Any]]
    optimizers: Mapping[str, Mapping[str, Any]]
    dataset: str
    image_size: int
    seeds: tuple[int, ...]
    source: Mapping[str, Any]

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Study:
        """The study of ``params``, which ``dssl.config.params.load_params`` has validated (a missing key
        of an unvalidated file raises ``KeyError``)."""
        pretrain = params["pretrain"]
        models = {name: ModelSpec.from_entry(name, spec) for name, spec in (params.get("models") or {}).items()}
        strategies = {name: StrategyEntry.from_spec(name, spec)
                      for name, spec in (params.get("strategies") or {}).items()}
        trains = {fw: frozen(pretrain[fw]["train"]) for fw in FRAMEWORKS if "train" in (pretrain.get(fw) or {})}
        return cls(MappingProxyType(models), MappingProxyType(strategies), MappingProxyType(trains),
                   frozen(pretrain.get("optimizers") or {}), str(pretrain["dataset"]), int(pretrain["image_size"]),
                   tuple(int(s) for s in params.get(TOP_LEVEL_SEEDS) or ()),
                   frozen({key: params[key] for key in ("pretrain", TOP_LEVEL_SEEDS) if key in params}))

    def schedule(self, framework: str, entry: str | None = None) -> Mapping[str, Any]:
        """The training schedule of a cell: ``pretrain.<framework>.train`` with the strategy entry's own
        ``train`` overrides (a grid that needs another schedule, such as paper A's Table 2 with 200 rounds
        of 10 local epochs, names an entry that says so, and the entry, part of the stage name, carries it)."""
        override = self.strategies[entry].train if entry is not None else {}
        return MappingProxyType({**self.trains[framework], **override})

    def schedule_key(self, framework: str, key: str, entry: str | None = None) -> str:
        """The params key path a value of ``schedule(framework, entry)`` comes from (for messages)."""
        if entry is not None and key in self.strategies[entry].train:
            return f"strategies.{entry}.train.{key}"
        return f"pretrain.{framework}.train.{key}"

    def optimizer(self, model: str, entry: str | None = None) -> Mapping[str, Any]:
        """The optimizer recipe a cell trains with: its strategy entry's ``train.optimizer``, else the recipe
        of the model's backbone family (``pretrain.optimizers.<family>``)."""
        recipe = self.strategies[entry].optimizer if entry is not None else None
        return recipe if recipe is not None else self.optimizers[self.models[model].family]

    def cells(self, framework: str) -> tuple[GridCell, ...]:
        """Every cell of a framework (``fl``, ``decl``, ``local``: the union of its grids in grid order;
        ``central``: ``pretrain.central.models``), each with its seeds."""
        return self._cells[framework]

    @cached_property
    def _cells(self) -> Mapping[str, tuple[GridCell, ...]]:
        cells: dict[str, tuple[GridCell, ...]] = {}
        for framework in ("fl", "decl"):
            found = grid_cells(self.source, framework)
            cells[framework] = tuple(GridCell(framework, m, place, s, key, tuple(seeds_at(self.source, key)))
                                     for (m, place, s), key in zip(found, seeds_keys(self.source, framework, found)))
        found = local_cells(self.source)
        cells["local"] = tuple(GridCell("local", m, p, None, key, tuple(seeds_at(self.source, key)))
                               for (m, p), key in zip(found, seeds_keys(self.source, "local", found)))
        central = ((self.source["pretrain"].get("central") or {}).get("models")) or ()
        cells["central"] = tuple(GridCell("central", m, None, None, TOP_LEVEL_SEEDS, self.seeds) for m in central)
        return MappingProxyType(cells)

"""``strategies``: named entries of a registered strategy with its own options, the DecL round's keys and
a ``train`` override; and the strategies a grid names, each runnable in the grid's framework."""

from __future__ import annotations

from dataclasses import fields

from dssl.config.checker import Checker
from dssl.config.mixing import MIXING_SPECS  # torch-free: one spec module per rule
from dssl.config.sections.spec_options import check_options
from dssl.config.sections.training import SCHEDULES, TRAIN_KEYS, _check_optimizer, _check_train
from dssl.config.strategies import STRATEGY_SPECS, StrategySpec  # torch-free: one spec module per strategy
from dssl.config.study import DECL_ROUND_KEYS, ENTRY_KEYS, ENTRY_RECIPE_KEY  # an entry's layout, declared once
from dssl.registry import SpecRegistry
from dssl.specs import field_hint, option_defaults, option_keys
from dssl.topology.mixing import ORDERS
from dssl.training.options import STEP_KEYS  # torch-free


def _check_strategy_entry(c: Checker, spec: dict, path: str) -> None:
    """A ``strategies`` entry: a registered strategy's name and its own options (the fields of its spec's
    config, ``dssl.config.strategies``: each value of its type, in its range, one of its choices), plus for
    DecL the round's ``mixing`` rule and ``order``, and ``train``: overrides of the framework's training
    schedule for this entry's cells. What depends on several options together is checked when the stage
    builds the strategy, before training."""
    name = c.choice(spec, "name", STRATEGY_SPECS.names(), path)
    if name is None:
        return
    config = STRATEGY_SPECS[name].config
    c.unknown_keys(spec, {*ENTRY_KEYS, *option_keys(config)}, path)
    hints = {key: field_hint(config, key) or f"strategy {name!r} default: {default!r}"
             for key, default in option_defaults(config).items()}
    _check_registry_names(c, check_options(c, spec, path, config, hints=hints), path, config)
    if "train" in spec:
        train = c.mapping(spec["train"], f"{path}.train") or {}
        _check_train(c, train, (SCHEDULES["fl"], SCHEDULES["decl"]), f"{path}.train", frozenset({ENTRY_RECIPE_KEY}),
                     required=False)
        if ENTRY_RECIPE_KEY in train:
            _check_optimizer(c, train[ENTRY_RECIPE_KEY], f"{path}.train.{ENTRY_RECIPE_KEY}")
    if "mixing" in spec:
        c.choice(spec, "mixing", MIXING_SPECS.names(), path)
    if "order" in spec:
        c.choice(spec, "order", ORDERS, path)


def _check_registry_names(c: Checker, good: dict, path: str, config: type) -> None:
    """An option whose field names a registry (``metadata={"registry": <kind>}``, ``fedmar``'s ``alignment``)
    holds one of that registry's names, read without importing its code."""
    for field in fields(config):
        kind, value = field.metadata.get("registry"), good.get(field.name)
        if kind is None or value is None:
            continue
        names = SpecRegistry.of(kind).names()
        if value not in names:
            c.add(f"{path}.{field.name}", f"unknown {kind} {value!r}", f"one of: {', '.join(names)}")


def _declared(entry: object) -> StrategySpec | None:
    """The spec of a ``strategies`` entry's ``name`` (None when the entry or its name is not a known one)."""
    name = entry.get("name") if isinstance(entry, dict) else None
    return STRATEGY_SPECS[name] if isinstance(name, str) and name in STRATEGY_SPECS else None


def _check_grid_strategies(c: Checker, grid: dict, framework: str, path: str) -> None:
    """Each strategy of a grid runs in the grid's framework (its spec's ``frameworks``); FL entries carry no
    DecL round keys."""
    entries = c.params.get("strategies") or {}
    for i, name in enumerate(grid.get("strategies") or []):
        spec = entries.get(name) if isinstance(name, str) else None
        declared = _declared(spec)
        if declared is None:
            continue
        where = f"{path}.strategies[{i}]"
        if framework not in declared.frameworks:
            others = [n for n in STRATEGY_SPECS.names() if framework in STRATEGY_SPECS[n].frameworks]
            c.add(where, f"strategy {name!r} ({declared.name}) runs in {', '.join(declared.frameworks)}, "
                         f"not {framework}", f"{framework} strategies: {', '.join(others)}")
        elif framework == "fl" and set(DECL_ROUND_KEYS) & set(spec):
            c.add(where, f"strategy {name!r} sets {sorted(set(DECL_ROUND_KEYS) & set(spec))}, which only DecL uses",
                  "give the FL grid a strategy entry without them")
        elif (isinstance(spec.get("train"), dict)
              and set(spec["train"]) - TRAIN_KEYS[framework] - set(STEP_KEYS) - {ENTRY_RECIPE_KEY}):
            allowed = TRAIN_KEYS[framework] | set(STEP_KEYS) | {ENTRY_RECIPE_KEY}
            c.add(where, f"strategy {name!r} sets train keys {sorted(set(spec['train']) - allowed)}, which {framework} "
                         "training does not have", f"{framework} train keys: {', '.join(sorted(allowed))}")


def check_strategies(c: Checker) -> None:
    """Named strategy configurations: a registry ``name`` plus that strategy's options."""
    for name, path, spec in c.entries("strategies"):
        _check_strategy_entry(c, spec, path)

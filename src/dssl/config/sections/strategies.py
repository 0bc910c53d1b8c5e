"""``strategies``: named entries of a registered strategy with its own options, the DecL round's keys and
a ``train`` override; and the strategies a grid names, each runnable in the grid's framework."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.config.sections.training import SCHEDULES, TRAIN_KEYS, _check_optimizer, _check_train
from dssl.config.strategies import declared_strategies  # torch-free: read from the strategy modules
from dssl.config.study import DECL_ROUND_KEYS, ENTRY_KEYS, ENTRY_RECIPE_KEY  # an entry's layout, declared once
from dssl.topology.mixing import MIXING, ORDERS
from dssl.training.options import STEP_KEYS  # torch-free


def _check_strategy_entry(c: Checker, spec: dict, path: str) -> None:
    """A ``strategies`` entry: a registered strategy's name and its own options (the keyword arguments
    of its ``__init__``, read from the strategy modules by ``dssl.config.strategies``), plus for DecL
    the round's ``mixing`` rule and ``order``, and ``train``: overrides of the framework's training
    schedule for this entry's cells. Option values are checked when the stage builds the strategy,
    before training."""
    strategies = declared_strategies()
    name = c.choice(spec, "name", strategies, path)
    if name is None:
        return
    c.unknown_keys(spec, {*ENTRY_KEYS, *strategies[name].options}, path)
    for option in strategies[name].options:
        problem = strategies[name].value_problem(option, spec[option]) if option in spec else None
        if problem:
            default = dict(strategies[name].defaults).get(option)
            c.add(f"{path}.{option}", problem, f"strategy {name!r} default: {default!r}")
    if "train" in spec:
        train = c.mapping(spec["train"], f"{path}.train") or {}
        _check_train(c, train, (SCHEDULES["fl"], SCHEDULES["decl"]), f"{path}.train", frozenset({ENTRY_RECIPE_KEY}),
                     required=False)
        if ENTRY_RECIPE_KEY in train:
            _check_optimizer(c, train[ENTRY_RECIPE_KEY], f"{path}.train.{ENTRY_RECIPE_KEY}")
    if "mixing" in spec:
        c.choice(spec, "mixing", MIXING, path)
    if "order" in spec:
        c.choice(spec, "order", ORDERS, path)


def _check_grid_strategies(c: Checker, grid: dict, framework: str, path: str) -> None:
    """Each strategy of a grid runs in the grid's framework; FL entries carry no DecL round keys."""
    entries, strategies = c.params.get("strategies") or {}, declared_strategies()
    for i, name in enumerate(grid.get("strategies") or []):
        spec = entries.get(name) if isinstance(name, str) else None
        declared = strategies.get((spec or {}).get("name")) if isinstance(spec, dict) else None
        if declared is None:
            continue
        where = f"{path}.strategies[{i}]"
        if framework not in declared.frameworks:
            others = sorted(n for n, d in strategies.items() if framework in d.frameworks)
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

"""``evaluate``: downstream datasets with a test split, the protocols per framework and per grid, and
each protocol's config, its overrides and their ranges."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.config.dataset_facts import has_test_split
from dssl.config.backbones import FAMILIES
from dssl.config.lookups import backbone_families
from dssl.config.protocols import (  # torch-free: one spec module per protocol, its code loads when it runs
    OVERRIDE_KEYS,
    PROTOCOL_SPECS,
    override_names,
    resolve_overrides,
)
from dssl.config.ranges import declared_options
from dssl.config.sections.names import _name_list
from dssl.config.sections.training import _check_steps
from dssl.data.dataset_specs import DATASET_SPECS  # standard library only


# Registry names the evaluation section may use. Kept here so validation never imports torch; a test
# keeps each set equal to its registry (dssl.config.protocols.PROTOCOL_SPECS, dssl.models.vit.POOLS).
PROTOCOL_NAMES = set(PROTOCOL_SPECS.names())
VIT_POOLS = ("token", "avg")   # dssl.models.vit.POOLS: which features a ViT hands to evaluation
FRAMEWORKS = ("fl", "decl", "central", "local", "random")


def check_evaluate(c: Checker) -> None:
    evaluate = c.section("evaluate")
    if not evaluate:
        return
    path = "evaluate"
    c.unknown_keys(evaluate, {"datasets", "random_backbones", "protocols", "grids", "vit_pool", "reestimate_batchnorm",
                              *PROTOCOL_NAMES}, path)
    if "vit_pool" in evaluate:
        c.choice(evaluate, "vit_pool", VIT_POOLS, path)
    if not isinstance(evaluate.get("reestimate_batchnorm", False), bool):
        c.add(f"{path}.reestimate_batchnorm", f"must be true or false, got {evaluate['reestimate_batchnorm']!r}",
              "true: re-estimate a pretrained encoder's BatchNorm statistics before evaluating it (not in paper A)")
    datasets = c.params.get("datasets") or {}
    _downstream_datasets(c, evaluate, path, datasets)
    if "random_backbones" in evaluate:
        _name_list(c, evaluate, "random_backbones", set(backbone_families()), path, "backbones")
    protocols = c.mapping(evaluate.get("protocols"), f"{path}.protocols") or {}
    c.unknown_keys(protocols, FRAMEWORKS, f"{path}.protocols")
    for framework in protocols:
        if framework in FRAMEWORKS and protocols[framework] != []:   # [] = that framework is not evaluated
            _name_list(c, protocols, framework, PROTOCOL_NAMES, f"{path}.protocols", "protocols")
    _check_evaluation_grids(c, evaluate, path, datasets)
    from dssl.config.evaluation_plan import evaluated_protocols

    used = set(evaluated_protocols(c.params))
    for protocol in PROTOCOL_SPECS.names():  # sorted: problems come out in a stable order
        if protocol in evaluate:
            _check_protocol_config(c, evaluate[protocol], protocol, f"{path}.{protocol}")
        elif protocol in used:  # the evaluate stage reads evaluate.<protocol>
            c.add(f"{path}.{protocol}", "missing: the protocol is listed in evaluate.protocols",
                  f"settable keys: {', '.join(sorted(PROTOCOL_SPECS[protocol].keys))}")


def _downstream_datasets(c: Checker, entry: dict, path: str, datasets: dict) -> None:
    """``<path>.datasets``: defined datasets that have a test split to score on."""
    for name in _name_list(c, entry, "datasets", datasets, path, "datasets"):
        if name in DATASET_SPECS and not has_test_split(name, datasets.get(name) or {}, c.root):
            c.add(f"{path}.datasets", f"{name} has no test split: every image pretrains (test_fraction 0)",
                  f"set datasets.{name}.test_fraction (e.g. 0.2) to carve one, or evaluate on another dataset")


def _check_evaluation_grids(c: Checker, evaluate: dict, path: str, datasets: dict) -> None:
    """``evaluate.grids.<grid>``: what the table of a pretraining grid reads of its cells (``datasets``,
    ``protocols``; each defaults to the framework's), the grid named in ``pretrain.<fl|decl|local>.grids``."""
    from dssl.config.evaluation_plan import EVALUATION_KEYS
    from dssl.config.grids import named_grids

    grids = c.mapping(evaluate.get("grids", {}), f"{path}.grids") or {}
    known = {name for framework in ("fl", "decl", "local") for name in named_grids(c.params, framework)}
    for name, entry in grids.items():
        where = f"{path}.grids.{name}"
        if name not in known:
            c.add(where, "is not a grid of pretrain.fl, pretrain.decl or pretrain.local",
                  f"one of: {', '.join(sorted(known)) or '(none)'}")
            continue
        entry = c.mapping(entry, where)
        if entry is None:
            continue
        c.unknown_keys(entry, EVALUATION_KEYS, where)
        if not entry:
            c.add(where, "names neither datasets nor protocols", "give datasets: [...] and/or protocols: [...]")
        if "datasets" in entry:
            _downstream_datasets(c, entry, where, datasets)
        if "protocols" in entry:
            _name_list(c, entry, "protocols", PROTOCOL_NAMES, where, "protocols")


def _check_protocol_config(c: Checker, value: object, protocol: str, path: str) -> None:
    """Keys and values of ``evaluate.<protocol>``: the protocol's own config fields, the step options and
    the ``per_family`` / ``per_dataset`` overrides (each config they resolve to is built once)."""
    spec = c.mapping(value, path)
    if spec is None:
        return
    before = len(c.problems)
    keys = PROTOCOL_SPECS[protocol].keys
    c.unknown_keys(spec, keys | set(OVERRIDE_KEYS), path)
    c.number(spec, "val_fraction", path, low=0, high=0.5, low_open=True)
    _check_steps(c, spec, path)
    from dssl.config.evaluation_plan import evaluated_datasets

    datasets = [d for d in evaluated_datasets(c.params) if isinstance(d, str)]
    for table, names in (("per_family", FAMILIES), ("per_dataset", datasets)):
        for name, override in (c.mapping(spec.get(table, {}), f"{path}.{table}") or {}).items():
            where = f"{path}.{table}.{name}"
            if name not in names:
                kind = ("backbone family" if table == "per_family"
                        else "dataset an evaluation reads (evaluate.datasets, evaluate.grids)")
                c.add(where, f"{name!r} is not a {kind}",
                      f"one of: {', '.join(names) or '(none)'}")
            elif c.mapping(override, where) is not None:
                c.unknown_keys(override, keys, where)
                _check_steps(c, override, where)
    if len(c.problems) > before:
        return
    _check_ranges(c, protocol, spec)   # each number at its key path, before a config is built from them
    if len(c.problems) > before:
        return
    for dataset, family in override_names(spec, datasets):   # the config's own value checks, once keys are right
        try:
            PROTOCOL_SPECS[protocol].make_config(resolve_overrides(spec, dataset, family))
        except (TypeError, ValueError) as err:
            where = "".join(f" (per_{kind} {name})"
                            for kind, name in (("family", family), ("dataset", dataset)) if name)
            c.add(path + where, str(err), "see the protocol's config class in src/dssl/evaluation/configs.py")
            return


def check_protocol_ranges(c: Checker) -> None:
    """The numbers of ``evaluate.<protocol>`` and of its ``per_family`` / ``per_dataset`` overrides, each
    against the range its protocol's config class declares (``dssl.evaluation.configs``), at its key path."""
    evaluate = c.params.get("evaluate")
    for protocol in PROTOCOL_SPECS.names() if isinstance(evaluate, dict) else ():
        spec = evaluate.get(protocol)
        if isinstance(spec, dict):
            _check_ranges(c, protocol, spec)


def _check_ranges(c: Checker, protocol: str, spec: dict) -> None:
    """``check_protocol_ranges`` for one protocol; a key path already reported is not reported again."""
    path = f"evaluate.{protocol}"
    entries = [(path, spec)]
    for table in OVERRIDE_KEYS:
        overrides = spec.get(table)
        entries += [(f"{path}.{table}.{name}", override)
                    for name, override in (overrides.items() if isinstance(overrides, dict) else ())
                    if isinstance(override, dict)]
    config = PROTOCOL_SPECS[protocol].config
    settable = set(declared_options(config)) & PROTOCOL_SPECS[protocol].keys
    reported = {problem.path for problem in c.problems}
    for where, entry in entries:
        for key in sorted(settable & set(entry)):
            if f"{where}.{key}" not in reported:
                c.declared(entry, key, where, config)

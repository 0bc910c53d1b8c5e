"""``models``: a declared method and backbone, and hyper-parameters of the method's constructor."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.config.lookups import backbone_families
from dssl.config.methods import declared_methods, value_problem  # torch-free: read from the method modules


def check_models(c: Checker) -> None:
    for name, path, spec in c.entries("models"):
        c.unknown_keys(spec, {"method", "backbone", "hparams"}, path)
        method = c.choice(spec, "method", declared_methods(), path)
        c.choice(spec, "backbone", set(backbone_families()), path)
        hparams = c.mapping(spec["hparams"], f"{path}.hparams") if "hparams" in spec else None
        if method is not None and hparams:
            _check_method_hparams(c, declared_methods()[method], hparams, f"{path}.hparams")


def _check_method_hparams(c: Checker, method, hparams: dict, path: str) -> None:
    """A model's ``hparams``: keyword-only arguments of its method's constructor, each value of the
    argument's annotated type (ranges are the method's to check when it is built)."""
    accepted = method.hparam_names
    for key, value in hparams.items():
        if key not in accepted:
            c.add(f"{path}.{key}", f"method {method.name!r} has no hyper-parameter {key!r}",
                  f"accepted: {', '.join(accepted)}")
            continue
        hparam = method.hparam(key)
        problem = value_problem(value, hparam.annotation)
        if problem:
            c.add(f"{path}.{key}", problem, f"method {method.name!r} default: {hparam.default}")

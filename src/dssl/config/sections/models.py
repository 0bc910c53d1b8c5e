"""``models``: a declared method and backbone (``dssl.config.backbones``), and the method's hyper-parameters,
checked against the config dataclass its spec declares (``dssl.config.methods``: keys, types, ranges, choices)."""

from __future__ import annotations

from dssl.config.backbones import BACKBONE_SPECS  # standard library only: the specs, not the architectures
from dssl.config.checker import Checker
from dssl.config.methods import METHOD_SPECS  # standard library only: the specs, not the methods' code
from dssl.config.ranges import declared_options
from dssl.config.sections.spec_options import check_options, check_unknown
from dssl.specs import option_defaults


def check_models(c: Checker) -> None:
    for name, path, spec in c.entries("models"):
        c.unknown_keys(spec, {"method", "backbone", "hparams"}, path)
        method = c.choice(spec, "method", METHOD_SPECS.names(), path)
        c.choice(spec, "backbone", BACKBONE_SPECS.names(), path)
        hparams = c.mapping(spec["hparams"], f"{path}.hparams") if "hparams" in spec else None
        if method is not None and hparams:
            _check_method_hparams(c, method, hparams, f"{path}.hparams")


def _check_method_hparams(c: Checker, method: str, hparams: dict, path: str) -> None:
    """A model's ``hparams``: keys of its method's config, each value of the key's declared type and range; the
    hint names the range and the method's default."""
    config = METHOD_SPECS[method].config
    known = len(c.problems)
    check_unknown(c, hparams, path, config)
    check_options(c, hparams, path, config, hints=_hints(method, config))
    if len(c.problems) == known:   # each value fits: what is left are the config's checks across options
        try:
            config(**hparams)
        except ValueError as problem:
            c.add(path, str(problem), f"method {method!r}: see its spec, dssl/config/methods/{method}.py")


def _hints(method: str, config: type) -> dict[str, str]:
    ranges = declared_options(config)
    hints = {}
    for key, default in option_defaults(config).items():
        told = ("derived when the method is built" if default is None
                else str(default).lower() if isinstance(default, bool) else repr(default))
        hints[key] = (f"{key}: {ranges[key].range}; " if key in ranges else "") + f"method {method!r} default: {told}"
    return hints

"""A params file checked fully: structure (``config``) plus the registries whose code is heavy or
belongs to one stage only.

``config.sections`` checks structure and is part of every stage's code lineage. The checks gathered here
live with the code that owns the names (the report's sections, the theory's options) and run in
``dssl validate``, ``dssl dag write`` and in the stage that reads the section -- so a report change
reruns the report, not every training stage. They import the upper layers (reporting, theory), so
they sit here, above them, not in ``config``. Only the CLI imports this module.
"""

from __future__ import annotations

from pathlib import Path

from dssl.config.checker import Checker, ParamsError
from dssl.config.params import load_params, params_root
from dssl.reporting.sections import check_report_params
from dssl.theory.options import check_theory_params

REGISTRY_CHECKS = (check_report_params, check_theory_params)


def load_params_fully(path: Path | str) -> dict:
    """``load_params`` plus every registry check; one ParamsError listing the problems."""
    params = load_params(path)
    checker = Checker(params, params_root(path))
    for check in REGISTRY_CHECKS:
        check(checker)
    if checker.problems:
        raise ParamsError(str(path), checker.problems)
    return params

"""A training section (``pretrain.<framework>.train`` or a strategy entry's ``train``): its schedule's keys,
the step options and an optimizer recipe. The names of optimizers and learning-rate schedules are
kept here so validation never imports torch; a test keeps each set equal to its registry."""

from __future__ import annotations

from dssl.config.checker import Checker
from dssl.config.options import CentralSchedule, DecLSchedule, FLSchedule, OptimizerRecipe, keys_of
from dssl.training.options import STEP_KEYS, step_problems  # torch-free


OPTIMIZER_KEYS = keys_of(OptimizerRecipe)
OPTIMIZER_NAMES = {"sgd", "adamw", "adam"}
SCHEDULE_NAMES = {"constant", "cosine"}
# Training and evaluation seeds come from the top-level 'seeds' list (one run per seed), not these.
# Every training section also takes the step options (STEP_KEYS: device, precision, channels_last, compile).
FL_TRAIN_KEYS = keys_of(FLSchedule)
DECL_TRAIN_KEYS = keys_of(DecLSchedule)
TRAIN_KEYS = {"fl": FL_TRAIN_KEYS, "decl": DECL_TRAIN_KEYS}
CENTRAL_TRAIN_KEYS = keys_of(CentralSchedule)
SCHEDULES = {"fl": FLSchedule, "decl": DecLSchedule, "central": CentralSchedule, "local": CentralSchedule}


def _check_optimizer(c: Checker, spec: object, path: str) -> None:
    """An optimizer recipe: ``pretrain.optimizers.<family>`` or a strategy entry's ``train.optimizer``."""
    spec = c.mapping(spec, path)
    if spec is not None:
        c.unknown_keys(spec, OPTIMIZER_KEYS, path)
        c.choice(spec, "name", OPTIMIZER_NAMES, path)
        for key in ("base_lr", "momentum", "betas", "weight_decay"):
            c.declared(spec, key, path, OptimizerRecipe, required=key == "base_lr")
        if "schedule" in spec:
            c.choice(spec, "schedule", SCHEDULE_NAMES, path)


def _check_train(c: Checker, train: dict, schedules: tuple[type, ...], path: str, extra: frozenset[str] = frozenset(),
                 required: bool = True) -> None:
    """A training section: the keys of its ``schedules`` (``dssl.config.options``: each value an integer in
    its declared range; all present where ``required``), ``extra`` keys, and the step options, one problem
    per bad value."""
    declared = {key: schedule for schedule in reversed(schedules) for key in keys_of(schedule)}
    c.unknown_keys(train, set(declared) | extra | set(STEP_KEYS), path)
    for key in sorted(declared):
        c.declared(train, key, path, declared[key], required=required)
    _check_steps(c, train, path)


def _check_steps(c: Checker, entry: dict, path: str) -> None:
    for key, message in step_problems(entry):
        c.add(f"{path}.{key}", message)

"""``checkpoint``: how often training and evaluation checkpoint."""

from __future__ import annotations

from dssl.config.checker import Checker


# checkpoint.every_seconds above a day: a hard kill would lose more than a cluster job's usual time limit
MAX_CHECKPOINT_SECONDS = 86400


def check_checkpoint(c: Checker) -> None:
    """How often training and evaluation checkpoint (``dssl.training.preemption.CheckpointInterval``);
    optional: without it, after a round once a minute has passed."""
    section = c.section("checkpoint", required=False)
    if not section:
        return
    c.unknown_keys(section, {"every_rounds", "every_seconds"}, "checkpoint")
    c.number(section, "every_rounds", "checkpoint", integer=True, low=1, high=100000, required=False,
             hint="pretraining checkpoints after every N-th round (1: every round)")
    c.number(section, "every_seconds", "checkpoint", low=0, high=MAX_CHECKPOINT_SECONDS, required=False,
             hint="the least seconds between two routine checkpoints (0: none skipped); a hard kill loses "
                  "at most this much and one round or epoch")

"""A task function for the worker tests' subprocess (workers receive it pickled, by module name)."""

import time


def fails_on_one(task: int) -> int:
    """Task 1 fails at once; the others take a second, so workers are busy when the stage ends."""
    if task == 1:
        raise ValueError("task 1 failed")
    time.sleep(1.0)
    return task

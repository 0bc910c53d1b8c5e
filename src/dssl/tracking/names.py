"""MLflow run names: one function builds each, for the stage that logs a run and for whoever looks it up.

A run is found in the tracking store by its ``stage`` tag and its run name, both functions of what the
stage ran. An evaluation result file (a DVC output) names its stage, seed, dataset and protocol, so its
run's name follows from the file (``result_run_name``) and the file needs no run id: nothing has to be
written into it after the run is logged, and it stays a function of its inputs.
"""

from __future__ import annotations

from typing import Any, Mapping


def run_name(stage: str, run: str = "") -> str:
    """The run name of one run of ``stage``: ``<stage>/<run>`` (``run``: the seed's or the result's part,
    ``seed-1``, ``partitions/<name>``'s ``<name>``), or the stage's name for a stage that is one run."""
    return f"{stage}/{run}" if run else stage


def evaluation_run(seed: int, dataset: str, protocol: str) -> str:
    """An evaluation run within its stage, ``seed-<s>/<dataset>-<protocol>``: also its result file's path
    inside the stage's output folder, without ``.json``."""
    return f"seed-{int(seed)}/{dataset}-{protocol}"


def result_run_name(result: Mapping[str, Any]) -> str:
    """The MLflow run name of an evaluation result (a result file's content, or a row of loaded results):
    ``<stage>/seed-<s>/<dataset>-<protocol>``."""
    return run_name(str(result["stage"]), evaluation_run(result["seed"], str(result["dataset"]),
                                                         str(result["protocol"])))


def output_tag(path: str) -> str:
    """The tag of a run that holds the md5 of an output it describes (``output.<path>``, as ``input.<path>``
    holds an input's): among runs of one name, the one whose tag matches the file on disk wrote it."""
    return f"output.{path}"

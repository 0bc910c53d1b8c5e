"""Wall time per stage of the latest run of each stage, from the project's MLflow store.

    .venv/bin/python benchmarks/stage_times.py [--profile embedded] [--root .]

Prints, per stage kind, the number of stages, their summed and largest `stage_seconds` (time inside
the stage, imports excluded), the largest peak resident memory of a stage (`peak_rss_mb`: the stage
process and its workers), and for training stages the images per second of local training. A stage
that runs several seeds logs one run per seed; they share the stage's figures.
Measure the whole pipeline's wall time with `time make repro`; the difference to the sum printed
here is process start-up and DVC's own bookkeeping.

``--against OTHER`` (another finished tree, e.g. an earlier fresh clone) compares the two runs' speed on
the stages they share unchanged: a stage whose lock entry (command, dependencies' hashes, params) is the
same in both trees did the same computation in both, so the ratio of its seconds is the machine's speed at
the two runs' hours, not the code's. It prints that ratio per stage kind and over all shared stages, and
this run's summed stage time at the other run's speed (every stage scaled by the shared stages' ratio).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pandas as pd

from dssl.lineage.lock import LineageError, LockedStage, read_lock
from dssl.tracking import stage_runs
from dssl.tracking.mlflow_store import STORE_FILE, is_server, tracking_uri


def stage_kind(names: pd.Index | pd.Series) -> pd.Index | pd.Series:
    """The stage kind of each stage name (``pretrain_fl@simsiam-cnn-fl-iid-fedavg`` -> ``pretrain_fl``)."""
    return names.str.split("@").str[0]


def load_runs(root: Path, profile: str) -> pd.DataFrame:
    """The MLflow runs of a profile's stages in ``root``'s store; exits naming the store if there are none.
    A folder without the SQLite store is refused before MLflow opens it (opening would create an empty one)."""
    store = root / STORE_FILE
    if not is_server(tracking_uri(root)) and not store.is_file():
        raise SystemExit(f"{store}: no MLflow store; --root and --against name finished trees (where `make repro` ran)")
    runs = stage_runs(root, profile)
    if runs.empty:
        raise SystemExit(f"no runs of profile {profile!r} in {root / 'mlflow.db'}")
    return runs


def latest_seconds(runs: pd.DataFrame) -> pd.Series:
    """Each stage's ``stage_seconds`` in its latest run (a stage of several seeds logs one run per seed;
    they share the stage's figure)."""
    last = runs.sort_values("start_time").groupby("tags.stage").tail(1)
    return last.set_index("tags.stage")["metrics.stage_seconds"].rename("seconds")


def stage_inputs(root: Path) -> dict[str, LockedStage]:
    """Every stage the lock files record, without its outputs: its command, params and dependencies' hashes."""
    try:
        return {name: replace(stage, outs=()) for name, stage in read_lock(root).items()}
    except LineageError as err:
        raise SystemExit(str(err)) from err


def shared_stage_seconds(here: pd.Series, there: pd.Series, inputs_here: dict[str, LockedStage],
                         inputs_there: dict[str, LockedStage]) -> pd.DataFrame:
    """Seconds here and there of the stages both runs ran with the same lock entry, with their kind."""
    shared = [s for s in here.index.intersection(there.index)
              if s in inputs_here and inputs_here[s] == inputs_there.get(s)]
    table = pd.DataFrame({"here_s": here[shared], "there_s": there[shared]})
    table["kind"] = stage_kind(table.index)
    return table


def shared_line(here_s: float, there_s: float) -> str:
    """The line giving the shared stages' seconds in both runs and their ratio (``fresh_clone.py`` reads it)."""
    return f"all shared stages: {here_s:.0f} s here, {there_s:.0f} s there, ratio {here_s / there_s:.3f}"


def speed_against(here: pd.Series, root: Path, other: Path, profile: str) -> None:
    """Print the two runs' time ratio on the stages whose inputs are the same in both trees (``here``: this
    run's seconds per stage)."""
    there = latest_seconds(load_runs(other, profile))
    table = shared_stage_seconds(here, there, stage_inputs(root), stage_inputs(other))
    if table.empty:
        raise SystemExit(f"no stage of {root} ran with the same inputs (dvc.lock entries) in {other}")
    per_kind = table.groupby("kind").agg(stages=("here_s", "count"), here_s=("here_s", "sum"),
                                         there_s=("there_s", "sum"))
    per_kind["ratio"] = per_kind["here_s"] / per_kind["there_s"]
    ratio = table["here_s"].sum() / table["there_s"].sum()
    print(f"\nstages with the same inputs in {other}: {len(table)} of {len(here)}")
    print(per_kind.round(2).to_string())
    print(shared_line(table["here_s"].sum(), table["there_s"].sum()))
    print(f"this run's summed stage time {here.sum():.0f} s; at the other run's speed {here.sum() / ratio:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="embedded")
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--against", type=Path, help="another finished tree: the speed ratio on shared stages")
    args = parser.parse_args()
    runs = load_runs(args.root.resolve(), args.profile)
    per_stage = latest_seconds(runs).to_frame()
    runs = runs.rename(columns={"tags.stage": "stage_tag"})
    if "metrics.peak_rss_mb" in runs:
        per_stage["peak_rss_mb"] = runs.groupby("stage_tag")["metrics.peak_rss_mb"].max()
    per_stage["kind"] = stage_kind(per_stage.index)
    table = per_stage.groupby("kind").agg(stages=("seconds", "count"), total_s=("seconds", "sum"),
                                          max_s=("seconds", "max"))
    if "peak_rss_mb" in per_stage:
        table["max_peak_rss_mb"] = per_stage.groupby("kind")["peak_rss_mb"].max()
    if "metrics.images_per_s" in runs:
        runs["kind"] = stage_kind(runs["stage_tag"])
        table["images_per_s"] = runs.groupby("kind")["metrics.images_per_s"].mean()
    print(table.round(1).to_string())
    print(f"\nall stages: {len(per_stage)}, summed stage time {per_stage['seconds'].sum():.0f} s")
    if args.against:
        speed_against(per_stage["seconds"], args.root.resolve(), args.against.resolve(), args.profile)


if __name__ == "__main__":
    main()

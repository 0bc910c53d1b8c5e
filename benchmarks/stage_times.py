"""Wall time per stage of the latest run of each stage, from the project's MLflow store.

    .venv/bin/python benchmarks/stage_times.py [--profile embedded] [--root .]

Prints, per stage kind, the number of stages, their summed and largest `stage_seconds` (time inside
the stage, imports excluded), and for training stages the images per second of local training.
Measure the whole pipeline's wall time with `time make repro`; the difference to the sum printed
here is process start-up and DVC's own bookkeeping.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dssl.tracking import stage_runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="embedded")
    parser.add_argument("--root", type=Path, default=Path("."))
    args = parser.parse_args()
    runs = stage_runs(args.root.resolve(), args.profile)
    if runs.empty:
        raise SystemExit(f"no runs of profile {args.profile!r} in {args.root.resolve() / 'mlflow.db'}")
    latest = runs.sort_values("start_time").groupby("stage").tail(1).copy()
    latest["kind"] = latest["stage"].str.split("@").str[0]
    table = latest.groupby("kind").agg(
        stages=("stage", "count"),
        total_s=("metrics.stage_seconds", "sum"),
        max_s=("metrics.stage_seconds", "max"),
    )
    if "metrics.images_per_s" in latest:
        table["images_per_s"] = latest.groupby("kind")["metrics.images_per_s"].mean()
    print(table.round(1).to_string())
    print(f"\nall stages: {len(latest)}, summed stage time {latest['metrics.stage_seconds'].sum():.0f} s")


if __name__ == "__main__":
    main()

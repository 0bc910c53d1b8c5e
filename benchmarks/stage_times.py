"""Wall time per stage of the latest run of each stage, from the project's MLflow store.

    .venv/bin/python benchmarks/stage_times.py [--profile embedded] [--root .]

Prints, per stage kind, the number of stages, their summed and largest `stage_seconds` (time inside
the stage, imports excluded), the largest peak resident memory of a stage (`peak_rss_mb`: the stage
process and its workers), and for training stages the images per second of local training. A stage
that runs several seeds logs one run per seed; they share the stage's figures.
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
    runs = runs.rename(columns={"tags.stage": "stage_tag"})
    # the latest execution of each stage: its runs share the stage's last logged stage_seconds
    last = runs.sort_values("start_time").groupby("stage_tag").tail(1)[["stage_tag", "metrics.stage_seconds"]]
    per_stage = last.set_index("stage_tag")["metrics.stage_seconds"].rename("seconds").to_frame()
    if "metrics.peak_rss_mb" in runs:
        per_stage["peak_rss_mb"] = runs.groupby("stage_tag")["metrics.peak_rss_mb"].max()
    per_stage["kind"] = per_stage.index.str.split("@").str[0]
    table = per_stage.groupby("kind").agg(stages=("seconds", "count"), total_s=("seconds", "sum"),
                                          max_s=("seconds", "max"))
    if "peak_rss_mb" in per_stage:
        table["max_peak_rss_mb"] = per_stage.groupby("kind")["peak_rss_mb"].max()
    if "metrics.images_per_s" in runs:
        runs["kind"] = runs["stage_tag"].str.split("@").str[0]
        table["images_per_s"] = runs.groupby("kind")["metrics.images_per_s"].mean()
    print(table.round(1).to_string())
    print(f"\nall stages: {len(per_stage)}, summed stage time {per_stage['seconds'].sum():.0f} s")


if __name__ == "__main__":
    main()

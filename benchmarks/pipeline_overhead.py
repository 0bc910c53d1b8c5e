"""Where a pipeline run spends its wall time: inside stages, between them, and how busy the cores are.

    .venv/bin/python benchmarks/pipeline_overhead.py [--root .] [--profile embedded] -- make repro

Runs the command (default ``dvc repro``) in ``--root`` while sampling the machine's CPU counters
(/proc/stat) every ``--interval`` seconds, then reads the MLflow runs the command created and prints:
- wall time of the command, summed time inside stages (each stage's ``stage_seconds``: from the stage
  entry's start, after imports, to the end of its logging) and the share spent between stages;
- CPU utilisation (busy / all cores) over the windows in which training stages (pretrain_*,
  evaluate_*) ran, and over the whole run;
- images/s of local training (mean over pretraining runs) and peak resident memory per stage kind.
Run it on a quiet machine: other processes count as busy cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading
import time
from pathlib import Path

TRAINING_KINDS = ("pretrain_", "evaluate_")


def cpu_counters() -> tuple[int, int]:
    """(busy, total) jiffies summed over all cores."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


class CpuSampler(threading.Thread):
    """Samples (time, busy, total) until stopped."""

    def __init__(self, interval: float):
        super().__init__(daemon=True)
        self.interval, self.samples, self._stop_event = interval, [], threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.samples.append((time.time(), *cpu_counters()))
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self.samples.append((time.time(), *cpu_counters()))

    def utilisation(self, windows: list[tuple[float, float]]) -> float:
        """Busy share of all cores over the union of sample intervals that overlap ``windows``."""
        busy = total = 0
        for (t0, b0, a0), (t1, b1, a1) in zip(self.samples, self.samples[1:]):
            if any(start < t1 and t0 < end for start, end in windows):
                busy, total = busy + b1 - b0, total + a1 - a0
        return busy / total if total else float("nan")


def finished_runs(root: Path, profile: str, since: float) -> list[dict]:
    import mlflow

    from dssl.tracking import tracking_uri
    from dssl.tracking.mlflow_store import experiment_name

    client = mlflow.MlflowClient(tracking_uri=tracking_uri(root))
    experiment = client.get_experiment_by_name(experiment_name(profile))
    if experiment is None:
        return []
    runs = client.search_runs([experiment.experiment_id], max_results=50000)
    return [
        {"stage": r.data.tags.get("stage", r.info.run_name), "start": r.info.start_time / 1000,
         "end": (r.info.end_time or r.info.start_time) / 1000, **r.data.metrics}
        for r in runs if r.info.start_time / 1000 >= since
    ]


def report(runs: list[dict], wall: float, sampler: CpuSampler) -> None:
    import pandas as pd

    frame = pd.DataFrame(runs)
    frame["kind"] = frame["stage"].str.split("@").str[0]
    # One stage may log several runs (one per seed): its time inside is the stage's own figure.
    per_stage = frame.groupby("stage").agg(kind=("kind", "first"), inside=("stage_seconds", "max"),
                                           start=("start", "min"), end=("end", "max"))
    inside = float(per_stage["inside"].sum())
    training = per_stage[per_stage["kind"].str.startswith(TRAINING_KINDS)]
    windows = [(r.end - r.inside, r.end) for r in training.itertuples()]
    print(f"stages: {len(per_stage)}  wall: {wall:.0f} s  inside stages: {inside:.0f} s  "
          f"between stages: {wall - inside:.0f} s = {100 * (wall - inside) / wall:.1f} % of wall")
    print(f"CPU utilisation (all {os.cpu_count()} cores): training stages "
          f"{100 * sampler.utilisation(windows):.0f} %, whole run "
          f"{100 * sampler.utilisation([(0, float('inf'))]):.0f} %")
    kinds = per_stage.groupby("kind").agg(stages=("inside", "count"), inside_s=("inside", "sum"))
    if "images_per_s" in frame:
        kinds["images_per_s"] = frame.groupby("kind")["images_per_s"].mean()
    if "peak_rss_mb" in frame:
        kinds["peak_rss_mb"] = frame.groupby("kind")["peak_rss_mb"].max()
    print(kinds.round(1).to_string())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--profile", default="embedded")
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("command", nargs="*", default=["dvc", "repro"])
    args = parser.parse_args()
    root = args.root.resolve()
    sampler = CpuSampler(args.interval)
    started = time.time()
    sampler.start()
    status = subprocess.run(args.command, cwd=root).returncode
    wall = time.time() - started
    sampler.stop()
    if status:
        raise SystemExit(f"{' '.join(args.command)} failed with exit {status}")
    runs = finished_runs(root, args.profile, started)
    if not runs:
        raise SystemExit("the command logged no stage runs (was everything up to date?)")
    report(runs, wall, sampler)


if __name__ == "__main__":
    main()

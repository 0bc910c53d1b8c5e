"""What DVC's per-stage bookkeeping costs with one dvc.lock against one lock file per group of stages.

    .venv/bin/python benchmarks/dvc_lock_overhead.py [--stages 100] [--files 10]

Builds two scratch DVC projects with the same ``--stages`` trivial stages (each writes a folder of three
small files and reads its own params entry, so each lock entry is about as long as a pipeline stage's):
one with every stage in the top-level dvc.yaml, one with the stages spread over ``--files`` dvc.yaml files
under ``pipelines/<group>/`` (``wdir: ../..``; ``dssl dag write`` spreads a pipeline's stages over one
file per kind and model). It times ``dvc repro`` of each and prints the seconds per stage. The stages compute nothing,
so the figure is DVC's own cost per stage; most of it grows with the size of the stage's lock file, which DVC
re-reads and rewrites (a YAML round trip) after every stage.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

DVC = str(Path(sys.executable).parent / "dvc")


def stage(index: int, wdir: str | None) -> dict:
    block = {"cmd": f"mkdir -p out/s{index} && for k in 1 2 3; do echo {index}-$k > out/s{index}/f$k.txt; done"}
    if wdir:
        block["wdir"] = wdir
    block.update({"params": [{"params.yaml": [f"p{index}"]}], "deps": ["params.yaml"], "outs": [f"out/s{index}"]})
    return block


def project(root: Path, stages: int, files: int) -> Path:
    """A git + DVC project whose ``stages`` stages lie in ``files`` dvc.yaml files (1: the top level)."""
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([DVC, "init", "-q"], cwd=root, check=True)
    params = {f"p{i}": {"lr_grid": [0.001, 0.003, 0.01], "epochs": 100, "weight_decay_grid": [0.0, 1e-4]}
              for i in range(stages)}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    groups: dict[str, dict] = {}
    for i in range(stages):
        path = "dvc.yaml" if files == 1 else f"pipelines/g{i % files}/dvc.yaml"
        groups.setdefault(path, {})[f"s{i}"] = stage(i, None if files == 1 else "../..")
    for path, block in groups.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(yaml.safe_dump({"stages": block}, sort_keys=False))
    return root


def seconds_per_stage(root: Path, stages: int, all_pipelines: bool) -> float:
    start = time.perf_counter()
    subprocess.run([DVC, "repro", "-q", *(["--all-pipelines"] if all_pipelines else [])], cwd=root, check=True,
                   env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    return (time.perf_counter() - start) / stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=int, default=100)
    parser.add_argument("--files", type=int, default=10)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="dvc-lock-"))
    try:
        one = seconds_per_stage(project(scratch / "one", args.stages, 1), args.stages, False)
        split = seconds_per_stage(project(scratch / "split", args.stages, args.files), args.stages, True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"{args.stages} stages that compute nothing, dvc repro:")
    print(f"  one dvc.lock:          {one:.3f} s per stage")
    print(f"  {args.files} lock files:        {split:.3f} s per stage")
    print(f"dvc_overhead_ratio: {one / split:.2f}x")


if __name__ == "__main__":
    main()

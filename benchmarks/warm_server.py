"""What the warm stage server saves per stage: one light stage run cold and through the server.

    .venv/bin/python benchmarks/warm_server.py [--repeats 5]

In a scratch project (params.yaml of this checkout, its own MLflow store), runs ``dssl prepare
<dataset>`` and ``dssl partitions`` (every partition) ``--repeats`` times each as a plain process
(imports paid every time) and through ``dssl warm start`` (imports paid once, a fork per stage), and prints the
median wall time per stage of each and the saving. Multiply the saving by the stage count of
``dvc repro`` (``dvc dag``) for the pipeline-level gain.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def scratch_project(folder: Path) -> Path:
    for name in ("params.yaml", "dvc.yaml"):
        shutil.copy(REPO / name, folder / name)
    if (REPO / "reports" / "verdicts").is_dir():   # the verdict records params.yaml may list (validated)
        shutil.copytree(REPO / "reports" / "verdicts", folder / "reports" / "verdicts")
    return folder


def timed(command: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import yaml

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    dataset = next(iter(params["datasets"]))
    commands = {"prepare": ["dssl", "prepare", dataset], "partitions": ["dssl", "partitions"]}
    with tempfile.TemporaryDirectory() as tmp:
        root = scratch_project(Path(tmp))
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        subprocess.run(["dssl", "tracking", "init"], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(commands["prepare"], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
        cold = {k: [timed(c, root, {**env, "DSSL_WARM": "0"}) for _ in range(args.repeats)]
                for k, c in commands.items()}
        subprocess.run(["dssl", "warm", "start"], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
        try:
            warm = {k: [timed(c, root, env) for _ in range(args.repeats)] for k, c in commands.items()}
        finally:
            subprocess.run(["dssl", "warm", "stop"], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
    for kind in commands:
        c, w = statistics.median(cold[kind]), statistics.median(warm[kind])
        print(f"{kind:10s} cold {c:5.2f} s  warm {w:5.2f} s  saved {c - w:5.2f} s per stage (median of {args.repeats})")


if __name__ == "__main__":
    main()

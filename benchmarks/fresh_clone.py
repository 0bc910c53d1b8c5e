"""The run-time budget as a new user meets it: a fresh clone's `make setup` + `make repro`, timed, and its
claims compared with the verdict records the clone carries.

    .venv/bin/python benchmarks/fresh_clone.py [--commit HEAD] [--dir /tmp/dssl-fresh] [--against TREE] [--remove]

Clones this checkout at ``--commit`` into ``--dir`` (which must not exist), runs ``--setup`` and then
``--repro`` there (defaults: the README's `make setup` and `make repro`; the environment is passed on, so
kernel pins such as ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` set before the command apply),
each command's output going to ``<dir>.setup.log`` and ``<dir>.repro.log``, and prints:
- the machine (CPU, the kernels torch picks, the pins set) and the stage count of the run;
- seconds of set-up and of the run, minutes in all, against the 30-minute budget;
- for each record under the clone's ``reports/verdicts/``: whether the run's ``claims.csv`` is byte-equal
  to it, else how many of its rows (claims and pretraining gates) have another verdict;
- the row for the run-time table of docs/reproducibility.md;
- seconds inside the stages per stage kind (the clone's ``benchmarks/stage_times.py``, from its MLflow store);
- with ``--against <tree>`` (a finished tree of an earlier run, repeatable): the run's speed on the stages
  both ran with the same inputs (``stage_times.py --against``) and its time at that tree's speed, so the
  machine's hour can be told from the change.
The clone is kept (its report and results are the run's evidence; `dssl verdicts export` records them)
unless ``--remove``. Run it on a machine with nothing else to do: other processes slow the run.
"""

from __future__ import annotations

import argparse
import csv
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from dssl.pipeline.verdicts import CLAIMS, VERDICTS
from dssl.reporting.verdicts import KEY   # a claim's identity, as the report compares records by it
from dssl.tracking.lineage import PINNED, hardware, hardware_label

ROOT = Path(__file__).resolve().parents[1]

BUDGET_MINUTES = 30.0   # the embedded default's target: set-up + run on a 2-core machine (README)


def timed(command: str, cwd: Path, log: Path) -> float:
    """Seconds ``command`` took in ``cwd``; its output to ``log``. A failing command stops the benchmark
    with the end of its log."""
    start = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(command, shell=True, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-20:])
        raise SystemExit(f"`{command}` failed (exit {done.returncode}) after {seconds:.0f} s in {cwd}; "
                         f"the end of {log}:\n{tail}")
    return seconds


def verdicts(path: Path) -> dict[tuple[str, ...], str]:
    with path.open(newline="") as f:
        return {tuple(row[k] for k in KEY): row["verdict"] for row in csv.DictReader(f)}


def compare_with_records(clone: Path) -> list[str]:
    """One line per record: byte-equal, or how many of its rows have another verdict (or are missing)."""
    claims = clone / CLAIMS
    if not claims.is_file():
        return [f"no {CLAIMS} in the clone: the run wrote no report"]
    ours, lines = verdicts(claims), []
    for record in sorted(p.parent for p in (clone / VERDICTS).glob("*/claims.csv")):
        theirs = verdicts(record / "claims.csv")
        if (record / "claims.csv").read_bytes() == claims.read_bytes():
            lines.append(f"{record.name}: claims.csv byte-equal")
            continue
        differ = sum(ours.get(key) != verdict for key, verdict in theirs.items())
        only_ours = len(ours.keys() - theirs.keys())
        lines.append(f"{record.name}: claims.csv differs; {differ} of its {len(theirs)} rows (claims and "
                     f"pretraining gates) have another verdict or are missing here, {only_ours} are only here")
    return lines or [f"no records under {VERDICTS} in the clone"]


def stage_count(log: Path) -> int:
    return sum(line.startswith("Running stage ") for line in log.read_text().splitlines())


def stage_times(clone: Path) -> str:
    """The clone's own ``benchmarks/stage_times.py`` over its MLflow store, or why there is none."""
    done = subprocess.run([sys.executable, str(clone / "benchmarks/stage_times.py"), "--root", str(clone)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return f"stage times: none ({(done.stderr.strip().splitlines() or ['no output'])[-1]})"
    return "stage times (seconds inside stages, per stage kind):\n" + done.stdout.rstrip()


RATIO = re.compile(r"^all shared stages: .* ratio ([0-9.]+)$", re.M)


def speed_against(clone: Path, tree: Path, setup: float, repro: float) -> str:
    """The clone's speed against a finished ``tree`` (``stage_times.py --against``: this run's seconds over
    the tree's on the stages both ran with the same inputs) and the run's time at the tree's speed."""
    done = subprocess.run([sys.executable, str(clone / "benchmarks/stage_times.py"), "--root", str(clone),
                           "--against", str(tree)], capture_output=True, text=True)
    found = RATIO.search(done.stdout) if done.returncode == 0 else None
    if found is None:
        return f"against {tree}: none ({(done.stderr.strip().splitlines() or ['no shared stages'])[-1]})"
    ratio = float(found.group(1))
    at_speed = repro / ratio
    return (f"against {tree}: the shared stages took {ratio:.2f}x their time there; at its speed `repro` "
            f"~{at_speed:.0f} s, {(setup + at_speed) / 60:.1f} min in all")


def finished_tree(path: Path) -> Path:
    """An ``--against`` tree, checked before the run: a folder where `make repro` ran (its MLflow store)."""
    from dssl.tracking.mlflow_store import STORE_FILE

    tree = path.resolve()
    if not (tree / STORE_FILE).is_file():
        raise SystemExit(f"--against {tree}: no {STORE_FILE} there; name the folder of a finished run")
    return tree


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default="HEAD", help="what to clone (default: this checkout's HEAD)")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/dssl-fresh"), help="the clone (must not exist)")
    parser.add_argument("--setup", default="make setup", help="the set-up command, run in the clone")
    parser.add_argument("--repro", default="make repro", help="the run, in the clone")
    parser.add_argument("--against", type=Path, action="append", default=[],
                        help="a finished tree of an earlier run: the run's speed against it (repeatable)")
    parser.add_argument("--remove", action="store_true", help="delete the clone afterwards")
    args = parser.parse_args(argv)
    trees = [finished_tree(path) for path in args.against]

    clone = args.dir.resolve()
    if clone.exists():
        raise SystemExit(f"--dir {clone} exists: name a new folder (the benchmark clones into it)")
    commit = subprocess.run(["git", "rev-parse", "--verify", f"{args.commit}^{{commit}}"], cwd=ROOT,
                            capture_output=True, text=True)
    if commit.returncode != 0:
        raise SystemExit(f"--commit {args.commit!r} is not a commit of {ROOT}: {commit.stderr.strip()}")
    sha = commit.stdout.strip()
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "checkout", "--quiet", sha], cwd=clone, check=True)

    logs = {name: clone.with_name(f"{clone.name}.{name}.log") for name in ("setup", "repro")}
    setup = timed(args.setup, clone, logs["setup"])
    repro = timed(args.repro, clone, logs["repro"])
    import torch  # noqa: F401  (imported, torch's kernel capability joins the machine facts)

    facts = hardware()
    minutes = (setup + repro) / 60
    print(f"commit: {sha[:10]}")
    print(f"machine: {hardware_label(facts)}")
    print(f"commands: {shlex.quote(args.setup)} then {shlex.quote(args.repro)}; "
          f"{stage_count(logs['repro'])} stages run")
    print(f"setup: {setup:.0f} s")
    print(f"repro: {repro:.0f} s")
    print(f"in all: {minutes:.1f} min ({'within' if minutes <= BUDGET_MINUTES else 'over'} the "
          f"{BUDGET_MINUTES:.0f}-minute budget)")
    for line in compare_with_records(clone):
        print(f"record {line}")
    pins = facts["hardware.kernel_pins"]
    machine = facts["hardware.cpu"] + (f", {PINNED}{pins}" if pins != "none" else "")
    print(f"row: | {sha[:7]} | {machine} | {facts.get('hardware.cpu_capability', '?')} | {setup:.0f} s "
          f"| {repro:.0f} s | **{minutes:.1f} min** |")
    print(stage_times(clone))
    for tree in trees:
        print(speed_against(clone, tree, setup, repro))
    if args.remove:
        shutil.rmtree(clone)
    else:
        print(f"clone kept: {clone} (logs beside it)")


if __name__ == "__main__":
    main()

"""Does pretraining beat the same backbone from random init? Paired margins over seeds, per model.

    python benchmarks/pretraining_margin.py [--params params.yaml] [--models simsiam-cnn mae-cnn]
        [--frameworks central fl-iid] [--protocols linear_probe linear_probe_10pct]
        [--set pretrain.central.train.epochs=20 ...] [--no-bn-reestimate]

For every model, framework and seed of the params file it trains with the pipeline's own stage code
(``pipeline.pretrain``: the central reference, or FedAvg on an FL partition), evaluates the encoder and
the random-init backbone pretraining seed s started from (``pipeline.evaluate``'s encoder and BN
re-estimation, ``dssl.evaluation`` protocols) on ``report.dataset`` and prints per model x framework x
protocol: the random-init and pretrained test accuracy (mean over seeds), the paired per-seed difference
with its 95 % Student-t interval (``reporting.stats.paired_difference``) and the training seconds (CPU
time of the one-thread worker, i.e. its cost on one core whatever else shares the machine, summed over
seeds; evaluation excluded). ``--set`` overrides params values (dotted path =
YAML value) before validation, so settings can be compared without editing the params file.

Everything is written under a fresh scratch folder (``--workdir``, default a new temporary folder):
prepared data, partitions, checkpoints. Nothing is logged to MLflow. Tasks (model x framework x seed,
and random-init x seed) run in the pipeline's worker processes, one torch thread each.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import yaml

from dssl.config.params import load_params
from dssl.pipeline.layout import prepared_dir


def apply_overrides(params: dict, overrides: list[str]) -> dict:
    """``a.b.c=value`` (value parsed as YAML) set in a copy of ``params``; the path must exist."""
    params = copy.deepcopy(params)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item!r}: expected dotted.key=value")
        *parents, leaf = key.split(".")
        node = params
        for part in parents:
            if not isinstance(node, dict) or part not in node:
                raise SystemExit(f"--set {item!r}: params has no section {part!r} on the way to {key!r}")
            node = node[part]
        node[leaf] = yaml.safe_load(value)
    return params


def prepare_data(params: dict, frameworks: list[str]) -> None:
    """Prepare the pretraining and downstream datasets, and the FL partitions asked for (cwd layout)."""
    from dssl.data.datasets import DATASETS
    from dssl.pipeline.partition import build

    for name in {params["pretrain"]["dataset"], params["report"]["dataset"]}:
        if not prepared_dir(name).exists():
            DATASETS[name].prepare(params["datasets"][name], prepared_dir(name))
    for framework in frameworks:
        if framework != "central":
            build(framework, params["partitions"][framework])


def _cell(params: dict, framework: str, model: str):
    from dssl.pipeline.pretrain import Cell, _params_read
    from dssl.pipeline.layout import partition_dir

    pretrain = params["pretrain"]
    if framework == "central":
        read = _params_read(params, model, {"central": {"train": pretrain["central"]["train"]}})
        return Cell(f"pretrain_central@{model}", "central", model, None, read)
    read = _params_read(params, model, {"fl": {"train": pretrain["fl"]["train"]}},
                        partitions={framework: params["partitions"][framework]})
    return Cell(f"pretrain_fl@{model}-{framework}", "fl", model, framework, read, (partition_dir(framework),))


def evaluate_encoder(encoder, params: dict, protocols: list[str], seed: int) -> dict[str, float]:
    """Test accuracy per protocol on ``report.dataset`` (the pipeline's downstream data and configs)."""
    from dssl.evaluation import evaluate
    from dssl.pipeline.evaluate import _downstream

    train, test = _downstream(params["report"]["dataset"], params["pretrain"]["image_size"])
    return {p: float(evaluate(p, encoder, train, test, dict(params["evaluate"][p]), seed)["test_acc"])
            for p in protocols}


def run_task(params: dict, protocols: list[str], bn_reestimate: bool, task: tuple[str, str, int]) -> dict:
    """One (framework, model or backbone, seed): train (unless random init), then evaluate."""
    from dssl.evaluation.batchnorm import reestimate_batchnorm
    from dssl.pipeline import pretrain
    from dssl.pipeline.evaluate import _downstream, _encoder

    framework, name, seed = task
    size = params["pretrain"]["image_size"]
    train, _ = _downstream(params["report"]["dataset"], size)
    if framework == "random":
        encoder = _encoder(name, size, train.image_shape[0], None, seed)
        return {"task": task, "seconds": 0.0, "acc": evaluate_encoder(encoder, params, protocols, seed)}
    run_seed = pretrain._central_seed if framework == "central" else pretrain._fl_seed
    started = time.process_time()  # CPU seconds of this one-thread worker: the cost on one core
    method, result, _ = run_seed(_cell(params, framework, name), params, seed)
    seconds = time.process_time() - started
    method.load_state_dict(result.final_state)
    encoder = method.encoder
    if bn_reestimate:
        reestimate_batchnorm(encoder, train)
    return {"task": task, "seconds": seconds, "acc": evaluate_encoder(encoder, params, protocols, seed),
            "final_loss": float(result.metrics[-1]["loss"]), "first_loss": float(result.metrics[0]["loss"])}


def summarise(results: list[dict], params: dict, protocols: list[str]) -> list[dict]:
    from dssl.reporting.stats import paired_difference

    by_task = {r["task"]: r for r in results}
    rows = []
    cells = dict.fromkeys(t[:2] for t in by_task if t[0] != "random")  # in task order
    for framework, model in cells:
        backbone = params["models"][model]["backbone"]
        seeds = sorted(t[2] for t in by_task if t[:2] == (framework, model))
        for protocol in protocols:
            pre = {s: by_task[(framework, model, s)]["acc"][protocol] for s in seeds}
            rnd = {s: by_task[("random", backbone, s)]["acc"][protocol] for s in seeds}
            diff = paired_difference(pre, rnd)
            rows.append({"model": model, "framework": framework, "protocol": protocol,
                         "random": sum(rnd.values()) / len(rnd), "pretrained": sum(pre.values()) / len(pre),
                         "diff": diff.mean, "low": diff.low, "high": diff.high,
                         "seconds": sum(by_task[(framework, model, s)]["seconds"] for s in seeds),
                         "loss": sum(by_task[(framework, model, s)]["final_loss"] for s in seeds) / len(seeds)})
    return rows


def print_rows(rows: list[dict]) -> None:
    header = f"{'model':<12} {'framework':<9} {'protocol':<19} {'random':>7} {'pretr.':>7} " \
             f"{'diff [95% CI]':>22} {'train s':>8} {'loss':>7}"
    print(header)
    for r in rows:
        ci = f"{100 * r['diff']:+.1f} [{100 * r['low']:+.1f}, {100 * r['high']:+.1f}]"
        print(f"{r['model']:<12} {r['framework']:<9} {r['protocol']:<19} {100 * r['random']:7.1f} "
              f"{100 * r['pretrained']:7.1f} {ci:>22} {r['seconds']:8.0f} {r['loss']:7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--models", nargs="+", help="default: pretrain.central.models")
    parser.add_argument("--frameworks", nargs="+", default=["central"],
                        help="'central' and/or FL partition names (e.g. fl-iid)")
    parser.add_argument("--protocols", nargs="+", help="default: evaluate.protocols.central")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-bn-reestimate", dest="bn_reestimate", action="store_false")
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a new temporary folder)")
    args = parser.parse_args()

    from dssl.config.params import read_params
    from dssl.pipeline.workers import run_tasks

    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="pretraining-margin-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    params = apply_overrides(read_params(args.params), args.overrides)
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    params = load_params(workdir / "params.yaml")  # validated, with the overrides
    models = args.models or params["pretrain"]["central"]["models"]
    protocols = args.protocols or params["evaluate"]["protocols"]["central"]
    missing = [p for p in protocols if p not in params["evaluate"]]
    if missing:
        raise SystemExit(f"protocols {missing} have no config under evaluate in {args.params}")
    os.chdir(workdir)
    started = time.perf_counter()
    prepare_data(params, args.frameworks)
    backbones = sorted({params["models"][m]["backbone"] for m in models})
    tasks = [(f, m, s) for f in args.frameworks for m in models for s in params["seeds"]]
    tasks += [("random", b, s) for b in backbones for s in params["seeds"]]
    results = [r for r, _ in run_tasks(partial(run_task, params, protocols, args.bn_reestimate), tasks)]
    print(f"# {args.params} {' '.join(args.overrides)} | dataset {params['report']['dataset']} | seeds "
          f"{params['seeds']} | BN re-estimation {'on' if args.bn_reestimate else 'off'} | "
          f"wall {time.perf_counter() - started:.0f} s", file=sys.stdout)
    print_rows(summarise(results, params, protocols))


if __name__ == "__main__":
    main()

"""Does pretraining beat the same backbone from random init? Paired margins over seeds, per model and cell.

    python benchmarks/pretraining_margin.py [--params params.yaml] [--models simsiam-cnn mae-cnn]
        [--cells central fl-iid:fedavg uniform-5:decl-uniform] [--protocols linear_probe_10pct knn]
        [--set pretrain.fl.train.rounds=60 ...] [--seeds 0 1 2 3 4] [--no-bn-reestimate]

A cell is ``central`` (the pooled data), ``<partition>:<strategy>`` (FL on an entry of ``partitions``
with a named entry of ``strategies``) or ``<graph>:<strategy>`` (DecL on an entry of ``graphs``). For
every model, cell and seed it trains with the pipeline's own stage code (``pipeline.pretrain``),
evaluates the encoder and the random-init backbone pretraining seed s started from
(``pipeline.evaluate``'s encoder and BN re-estimation, ``dssl.evaluation`` protocols) on
``report.dataset`` and prints per model x cell x protocol: the random-init and pretrained test accuracy
(mean over seeds), the paired per-seed difference with its 95 % Student-t interval
(``reporting.stats.paired_difference``) and the training seconds (CPU time of the one-thread worker,
i.e. its cost on one core whatever else shares the machine, summed over seeds; evaluation excluded).
``--set`` overrides params values (dotted path = YAML value) before validation, so settings can be
compared without editing the params file.

Everything is written under a fresh scratch folder (``--workdir``, default a new temporary folder):
prepared data, partitions, graphs, checkpoints. Nothing is logged to MLflow. Tasks (model x cell x
seed, and random-init x seed) run in the pipeline's worker processes, one torch thread each.
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


CENTRAL = "central"


def parse_cell(params: dict, text: str) -> tuple[str, str | None, str | None]:
    """``central``, ``<partition>:<strategy>`` or ``<graph>:<strategy>`` -> (framework, place, strategy)."""
    if text == CENTRAL:
        return CENTRAL, None, None
    place, sep, strategy = text.partition(":")
    if not sep or not strategy:
        raise SystemExit(f"--cells {text!r}: expected 'central', '<partition>:<strategy>' or '<graph>:<strategy>'")
    if strategy not in params["strategies"]:
        raise SystemExit(f"--cells {text!r}: no strategy {strategy!r}; known: {sorted(params['strategies'])}")
    if place in params["partitions"]:
        return "fl", place, strategy
    graphs = {**(params.get("graphs") or {}), **(params.get("improved_graphs") or {})}
    if place in graphs:
        return "decl", place, strategy
    raise SystemExit(f"--cells {text!r}: {place!r} is neither a partition nor a graph of the params file")


def prepare_data(params: dict, cells: list[tuple[str, str | None, str | None]]) -> None:
    """Prepare the pretraining and downstream datasets, and the partitions and graphs the cells use."""
    from dssl.config.lookups import graph_partition
    from dssl.data.datasets import DATASETS
    from dssl.pipeline import graph, partition
    from dssl.pipeline.pretrain import graph_spec

    for name in {params["pretrain"]["dataset"], params["report"]["dataset"]}:
        if not prepared_dir(name).exists():
            DATASETS[name].prepare(params["datasets"][name], prepared_dir(name))
    for framework, place, _ in cells:
        if framework == "fl":
            partition.build(place, params["partitions"][place])
        elif framework == "decl":
            source = graph_partition(params, place)
            partition.build(source, params["partitions"][source])
            graph.build(place, graph_spec(params, place))


def follow_figure_seed(params: dict) -> None:
    """Fig. 3's features are drawn from one of the run's seeds (``features.seed``, which the validator checks
    against ``seeds``); this script makes no figure, so with other seeds the figure seed follows the first."""
    features = params.get("features")
    seeds = params.get("seeds") or []
    if isinstance(features, dict) and seeds and features.get("seed") not in seeds:
        features["seed"] = seeds[0]


def _cell(params: dict, framework: str, place: str | None, strategy: str | None, model: str, seed: int):
    """The pipeline's cell of one task; its params record the one seed this task trains."""
    from dssl.config.lookups import graph_partition
    from dssl.pipeline.layout import graph_file, partition_dir
    from dssl.pipeline.pretrain import Cell, _params_read, graph_spec

    pretrain = params["pretrain"]
    if framework == CENTRAL:
        read = _params_read(params, model, {"central": {"train": pretrain["central"]["train"]}}, [seed])
        return Cell(f"pretrain_central@{model}", CENTRAL, model, None, read)
    strategies = {strategy: params["strategies"][strategy]}
    if framework == "fl":
        read = _params_read(params, model, {"fl": {"train": pretrain["fl"]["train"]}}, [seed],
                            partitions={place: params["partitions"][place]}, strategies=strategies)
        inputs = (partition_dir(place),)
    else:
        read = _params_read(params, model, {"decl": {"train": pretrain["decl"]["train"]}}, [seed],
                            graphs={place: graph_spec(params, place)}, strategies=strategies)
        inputs = (partition_dir(graph_partition(params, place)), graph_file(place))
    return Cell(f"pretrain_{framework}@{model}-{place}-{strategy}", framework, model, place, read, inputs, strategy)


def evaluate_encoder(encoder, params: dict, protocols: list[str], seed: int) -> dict[str, float]:
    """Test accuracy per protocol on ``report.dataset`` (the pipeline's downstream data and configs)."""
    from dssl.evaluation import evaluate
    from dssl.pipeline.evaluate import _downstream

    train, test = _downstream(params["report"]["dataset"], params["pretrain"]["image_size"])
    return {p: float(evaluate(p, encoder, train, test, dict(params["evaluate"][p]), seed)["test_acc"])
            for p in protocols}


def run_task(params: dict, protocols: list[str], bn_reestimate: bool, task: tuple[str, str, int]) -> dict:
    """One (cell or "random", model or backbone, seed): train (unless random init), then evaluate."""
    from dssl.evaluation.batchnorm import reestimate_batchnorm
    from dssl.pipeline import pretrain
    from dssl.pipeline.evaluate import _downstream, _encoder

    cell_text, name, seed = task
    size = params["pretrain"]["image_size"]
    train, _ = _downstream(params["report"]["dataset"], size)
    if cell_text == "random":
        encoder = _encoder(name, size, train.image_shape[0], None, seed, "cpu", params["evaluate"].get("vit_pool"))
        return {"task": task, "seconds": 0.0, "acc": evaluate_encoder(encoder, params, protocols, seed)}
    framework, place, strategy = parse_cell(params, cell_text)
    run_seed = {CENTRAL: pretrain._central_seed, "fl": pretrain._fl_seed, "decl": pretrain._decl_seed}[framework]
    started = time.process_time()  # CPU seconds of this one-thread worker: the cost on one core
    method, result, _ = run_seed(_cell(params, framework, place, strategy, name, seed), params, seed)
    seconds = time.process_time() - started
    method.load_state_dict(result.final_state)
    encoder = method.encoder
    if params["evaluate"].get("vit_pool") and hasattr(encoder, "set_pool"):
        encoder.set_pool(params["evaluate"]["vit_pool"])
    if bn_reestimate:
        reestimate_batchnorm(encoder, train)
    return {"task": task, "seconds": seconds, "acc": evaluate_encoder(encoder, params, protocols, seed),
            "final_loss": float(result.metrics[-1]["loss"]), "first_loss": float(result.metrics[0]["loss"])}


def summarise(results: list[dict], params: dict, protocols: list[str]) -> list[dict]:
    from dssl.reporting.stats import paired_difference

    by_task = {r["task"]: r for r in results}
    rows = []
    cells = dict.fromkeys(t[:2] for t in by_task if t[0] != "random")  # in task order
    for cell, model in cells:
        backbone = params["models"][model]["backbone"]
        seeds = sorted(t[2] for t in by_task if t[:2] == (cell, model))
        for protocol in protocols:
            pre = {s: by_task[(cell, model, s)]["acc"][protocol] for s in seeds}
            rnd = {s: by_task[("random", backbone, s)]["acc"][protocol] for s in seeds}
            diff = paired_difference(pre, rnd)
            rows.append({"model": model, "cell": cell, "protocol": protocol,
                         "random": sum(rnd.values()) / len(rnd), "pretrained": sum(pre.values()) / len(pre),
                         "diff": diff.mean, "low": diff.low, "high": diff.high,
                         "per_seed": [pre[s] - rnd[s] for s in seeds],
                         "seconds": sum(by_task[(cell, model, s)]["seconds"] for s in seeds),
                         "loss": sum(by_task[(cell, model, s)]["final_loss"] for s in seeds) / len(seeds)})
    return rows


def print_rows(rows: list[dict]) -> None:
    header = f"{'model':<14} {'cell':<28} {'protocol':<19} {'random':>7} {'pretr.':>7} " \
             f"{'diff [95% CI]':>22} {'train s':>8} {'loss':>7}"
    print(header)
    for r in rows:
        ci = f"{100 * r['diff']:+.1f} [{100 * r['low']:+.1f}, {100 * r['high']:+.1f}]"
        per_seed = " ".join(f"{100 * d:+.1f}" for d in r["per_seed"])
        print(f"{r['model']:<14} {r['cell']:<28} {r['protocol']:<19} {100 * r['random']:7.1f} "
              f"{100 * r['pretrained']:7.1f} {ci:>22} {r['seconds']:8.0f} {r['loss']:7.3f}  per seed: {per_seed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--models", nargs="+", help="default: pretrain.central.models")
    parser.add_argument("--cells", nargs="+", default=[CENTRAL],
                        help="'central', '<partition>:<strategy>' (FL) and/or '<graph>:<strategy>' (DecL)")
    parser.add_argument("--seeds", nargs="+", type=int, help="default: the params file's seeds")
    parser.add_argument("--protocols", nargs="+", help="default: evaluate.protocols.central")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-bn-reestimate", dest="bn_reestimate", action="store_false")
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a new temporary folder)")
    args = parser.parse_args()

    from dssl.config.params import read_params
    from dssl.pipeline.workers import run_tasks

    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="pretraining-margin-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    overrides = [*args.overrides, *([f"seeds={args.seeds}"] if args.seeds else [])]
    params = apply_overrides(read_params(args.params), overrides)
    follow_figure_seed(params)
    # no report is built here, and the verdict records it would compare live beside the params file, not here
    params.get("report", {}).pop("verdicts_elsewhere", None)
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    params = load_params(workdir / "params.yaml")  # validated, with the overrides
    models = args.models or params["pretrain"]["central"]["models"]
    protocols = args.protocols or params["evaluate"]["protocols"]["central"]
    missing = [p for p in protocols if p not in params["evaluate"]]
    if missing:
        raise SystemExit(f"protocols {missing} have no config under evaluate in {args.params}")
    os.chdir(workdir)
    started = time.perf_counter()
    cells = [parse_cell(params, c) for c in args.cells]
    prepare_data(params, cells)
    backbones = sorted({params["models"][m]["backbone"] for m in models})
    tasks = [(c, m, s) for c in args.cells for m in models for s in params["seeds"]]
    tasks += [("random", b, s) for b in backbones for s in params["seeds"]]
    results = [r for r, _ in run_tasks(partial(run_task, params, protocols, args.bn_reestimate), tasks)]
    print(f"# {args.params} {' '.join(overrides)} | dataset {params['report']['dataset']} | seeds "
          f"{params['seeds']} | BN re-estimation {'on' if args.bn_reestimate else 'off'} | "
          f"wall {time.perf_counter() - started:.0f} s", file=sys.stdout)
    print_rows(summarise(results, params, protocols))


if __name__ == "__main__":
    main()

"""The same FL round in this project's ``FLSimulator`` and in Flower's simulation engine, side by side.

Setting, identical on both sides: SimSiam on ``cnn_small`` at 16 px, scikit-learn's digits (1797 8x8
images, prepared in memory and resized to 16 px with dssl's ``resized``), 10 clients of
``--client-images`` images each (an IID split; default 32, one local step per round; at most 179),
5 clients per round, 1 local epoch, batch 32 with the last partial batch dropped, SGD as
``OptimizerConfig()`` (lr 0.05 * 32 / 256, momentum 0.9, wd 1e-4, fresh optimizer state per client
and round), FedAvg weighted by client size, 10 rounds, no federated evaluation, 1 torch thread per
client.

Three sides, each in a fresh interpreter (none inherits another's imports, threads or Ray):

- ours: ``FLSimulator`` with ``client_workers`` = the CPU count (``--client-workers``): the sampled
  clients train at once in forked worker processes of 1 thread each, as Flower's Ray workers do.
- in series: ``FLSimulator`` with ``client_workers=1``, the clients one after another in one process:
  a plain in-process loop. The target was set from such a loop measured 3.8x faster than Flower 1.42
  with Ray; this side says how close the setting is to that reference.
- Flower: ``flwr.simulation.run_simulation`` with a ``ServerApp`` (FedAvg, ``fraction_fit=0.5`` of
  10 clients = 5) and a ``ClientApp`` whose ``NumPyClient.fit`` loads the global weights, runs the
  same local epoch with dssl's ``train_client`` (the simulator's own loop: same steps, same
  optimizer) and returns the weights. Each virtual client gets ``num_cpus=1`` (and 1 torch thread),
  so Flower's Ray backend runs up to ``cores`` clients at once; the digits are loaded once per
  worker process and the model is built in ``client_fn``, as Flower's examples do.

Round time: ours, the simulator's per-round ``wall_time_s``; Flower, from the strategy's
``configure_fit`` to the end of its ``aggregate_fit`` (measured in the server process, a thread of
this one). The steady round is the median over the rounds after the first: Flower's rounds shorten
for a few rounds after Ray's start-up (its worker processes warm up), and a mean would count that
warm-up per round. One-off start-up is reported separately: the time before the first round starts
(ours: the digits, imports of the method, model and simulator; Flower: ``run_simulation`` until its
first ``configure_fit``) plus the first round's excess over the steady round. Flower's server starts
round 1 while Ray is still booting, so its start-up (Ray, worker processes, their imports of torch and
dssl) lands in that excess. The sides run ``--repeats`` times in turn; the figures are medians over the
repeats with their range.

    flower_speedup: R x    with R = the median over repeats of Flower's steady round / ours

Both sides train the same steps with the same code, so per round R cannot exceed Flower's steady round
over the compute floor (the local training spread evenly over the workers: what ours would take with
no time of its own); the ``bound`` line prints it. Neither framework splits a client's training over
workers, so the attainable floor is higher: the busiest worker trains ceil(5 / workers) of the 5
equal-sized clients (the ``whole clients`` line). With larger clients the shared training fills the
round and R falls towards 1 (``--client-images 179``: five steps per client). The end-to-end ratio
(whole runs, start-up included) is printed too.

Flower is an optional extra, never a dependency of the pipeline. Its pins conflict with the locked
stack (protobuf, fastapi, starlette), so install it into a separate environment:

    python3 -m venv .venv-bench && .venv-bench/bin/pip install -r requirements.lock
    .venv-bench/bin/pip install --no-deps -e . && .venv-bench/bin/pip install -e '.[bench]'
    .venv-bench/bin/python benchmarks/vs_flower.py

    PYTHONPATH=src python benchmarks/vs_flower.py [--client-images 32] [--rounds 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

NUM_CLIENTS, PER_ROUND, EPOCHS, BATCH, IMAGE_SIZE, METHOD, BACKBONE = 10, 5, 1, 32, 16, "simsiam", "cnn_small"
MAX_CLIENT_IMAGES = 1797 // NUM_CLIENTS  # the digits split evenly
REFERENCE_LOOP_SPEEDUP = 3.8  # the plain in-process loop vs Flower 1.42 with Ray that set the target


# -- shared pieces (imported by Flower's workers too) -----------------------------------------------

def digits_clients(images_per_client: int) -> list:
    """The digits as a 16 px ImageSet and 10 IID clients of ``images_per_client`` images (dssl ``ClientData``)."""
    from sklearn.datasets import load_digits

    from dssl.data.imageset import ArrayImageSet, resized
    from dssl.federation import ClientData

    digits = load_digits()
    pixels = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)[..., None]  # [N, 8, 8, 1]
    images = resized(ArrayImageSet(pixels, digits.target, 10), IMAGE_SIZE)
    order = np.random.default_rng(0).permutation(len(pixels))
    share = len(pixels) // NUM_CLIENTS
    return [ClientData(images, np.sort(order[i * share:i * share + images_per_client])) for i in range(NUM_CLIENTS)]


def new_method():
    import torch

    from dssl.methods import create_method

    torch.manual_seed(0)  # same initial weights on both sides
    return create_method(METHOD, BACKBONE, IMAGE_SIZE, 1)


# -- ours ----------------------------------------------------------------------------------------

def run_ours(rounds: int, client_workers: int, images_per_client: int) -> dict[str, Any]:
    import torch

    from dssl.federation import FLConfig, FLSimulator, OptimizerConfig, create_strategy

    torch.set_num_threads(1)
    start = time.perf_counter()
    clients = digits_clients(images_per_client)  # inside the start-up, as Flower's workers prepare theirs in theirs
    config = FLConfig(rounds=rounds, clients_per_round=PER_ROUND, local_epochs=EPOCHS, batch_size=BATCH,
                      optimizer=OptimizerConfig())
    simulator = FLSimulator(new_method(), clients, create_strategy("fedavg", aggregation="data_size"), config,
                            client_workers=client_workers)
    startup = time.perf_counter() - start
    metrics = simulator.run().metrics
    return {"startup": startup, "rounds": [m["wall_time_s"] for m in metrics],
            "train": [m["train_time_s"] for m in metrics],
            "loss": [m["loss"] for m in metrics], "steps": [m["steps"] for m in metrics]}


# -- Flower --------------------------------------------------------------------------------------

def require_flower() -> Any:
    try:
        import flwr
    except ImportError:
        raise SystemExit("vs_flower.py needs Flower, an optional extra of this project: "
                         "pip install -e '.[bench]'  (or: pip install 'flwr[simulation]')") from None
    return flwr


_WORKER_CLIENTS: list = []  # per worker process: the digits, prepared once


def flower_client_fn(images_per_client: int, context: Any) -> Any:
    """Flower's ``client_fn`` (with ``images_per_client`` bound): a NumPyClient for partition
    ``context.node_config['partition-id']``."""
    import torch
    from flwr.client import NumPyClient

    from dssl.federation.local import OptimizerConfig, build_optimizer, train_client
    from dssl.federation.reproducibility import torch_generator

    torch.set_num_threads(1)
    if not _WORKER_CLIENTS:
        _WORKER_CLIENTS.extend(digits_clients(images_per_client))
    partition = int(context.node_config["partition-id"])
    data = _WORKER_CLIENTS[partition]
    method = new_method()
    keys = list(method.state_dict())

    class DigitsClient(NumPyClient):
        def get_parameters(self, config: dict) -> list[np.ndarray]:
            return [tensor.cpu().numpy() for tensor in method.state_dict().values()]

        def fit(self, parameters: list[np.ndarray], config: dict) -> tuple[list[np.ndarray], int, dict]:
            # FedAvg averages int buffers (BN's num_batches_tracked) as floats; load_state_dict casts back.
            method.load_state_dict({k: torch.from_numpy(np.asarray(p)) for k, p in zip(keys, parameters)})
            optimizer_config = OptimizerConfig()
            optimizer = build_optimizer(method, optimizer_config, optimizer_config.lr(BATCH))
            seed = 1000 * int(config.get("server_round", 0)) + partition
            views = torch_generator(seed + 500)
            result = train_client(method, optimizer, data, lambda x: method.training_loss(x, generator=views),
                                  epochs=EPOCHS, batch_size=BATCH, drop_last=True,
                                  shuffle_generator=torch_generator(seed), augment_generator=torch_generator(seed),
                                  device=torch.device("cpu"))
            return self.get_parameters({}), data.num_samples, {"loss": result.losses["loss"],
                                                               "steps": result.steps}

    return DigitsClient().to_client()


def run_flower(rounds: int, cpus_per_client: float, images_per_client: int) -> dict[str, Any]:
    flwr = require_flower()
    from flwr.client import ClientApp
    from flwr.common import Context, ndarrays_to_parameters
    from flwr.server import ServerApp, ServerAppComponents, ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.simulation import run_simulation

    initial = ndarrays_to_parameters([t.numpy() for t in new_method().state_dict().values()])
    marks: dict[str, list] = {"begin": [], "end": [], "loss": [], "steps": []}

    class TimedFedAvg(FedAvg):
        """FedAvg that stamps each fit round's start and end (in the server process)."""

        def configure_fit(self, server_round, parameters, client_manager):
            marks["begin"].append(time.perf_counter())
            return super().configure_fit(server_round, parameters, client_manager)

        def aggregate_fit(self, server_round, results, failures):
            if failures:
                raise RuntimeError(f"Flower round {server_round}: {len(failures)} client failures: {failures[0]!r}")
            aggregated = super().aggregate_fit(server_round, results, failures)
            marks["end"].append(time.perf_counter())
            marks["loss"].append(float(np.mean([r.metrics["loss"] for _, r in results])))
            marks["steps"].append(int(sum(r.metrics["steps"] for _, r in results)))
            return aggregated

    def server_fn(context: Context) -> ServerAppComponents:
        strategy = TimedFedAvg(fraction_fit=PER_ROUND / NUM_CLIENTS, min_fit_clients=PER_ROUND,
                               min_available_clients=NUM_CLIENTS, fraction_evaluate=0.0, min_evaluate_clients=0,
                               initial_parameters=initial,
                               on_fit_config_fn=lambda server_round: {"server_round": server_round})
        return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=rounds))

    backend = {"client_resources": {"num_cpus": cpus_per_client, "num_gpus": 0.0},
               "init_args": {"num_cpus": os.cpu_count()}}
    start = time.perf_counter()
    client_app = ClientApp(client_fn=functools.partial(flower_client_fn, images_per_client))
    run_simulation(server_app=ServerApp(server_fn=server_fn), client_app=client_app,
                   num_supernodes=NUM_CLIENTS, backend_config=backend)
    total = time.perf_counter() - start
    if len(marks["end"]) != rounds:
        raise SystemExit(f"Flower finished {len(marks['end'])} of {rounds} rounds; see its log above")
    return {"startup": marks["begin"][0] - start, "rounds": [e - b for b, e in zip(marks["begin"], marks["end"])],
            "loss": marks["loss"], "steps": marks["steps"], "total": total, "version": flwr.__version__}


# -- report --------------------------------------------------------------------------------------

def summary(name: str, result: dict[str, Any]) -> str:
    rounds = " ".join(f"{t:.2f}" for t in result["rounds"])
    losses = " ".join(f"{x:.4f}" for x in result["loss"])
    return (f"{name:<9} per round {steady(result):6.2f} s | one-off start-up {one_off(result):6.2f} s "
            f"(before round 1: {result['startup']:.2f} s) | end-to-end {end_to_end(result):6.2f} s | "
            f"rounds (s) {rounds} | steps/round {result['steps'][0]} | loss {losses}")


def steady(result: dict[str, Any]) -> float:
    """Median wall time of the rounds after the first."""
    rounds = result["rounds"]
    return statistics.median(rounds[1:] if len(rounds) > 1 else rounds)


def one_off(result: dict[str, Any]) -> float:
    """Time before round 1 plus round 1's excess over the steady round."""
    return result["startup"] + result["rounds"][0] - steady(result)


def end_to_end(result: dict[str, Any]) -> float:
    return result.get("total", result["startup"] + sum(result["rounds"]))


SIDES = ("ours", "in series", "flower")


def run_side(args: argparse.Namespace) -> None:
    """One side of one repeat, in this (fresh) process; its figures go to ``args.result`` as JSON."""
    if args.side == "flower":
        result = run_flower(args.rounds, args.cpus_per_client, args.client_images)
    else:
        workers = args.client_workers if args.side == "ours" else 1
        result = run_ours(args.rounds, workers, args.client_images)
    Path(args.result).write_text(json.dumps(result))


def side_in_subprocess(side: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run ``side`` in a fresh interpreter, so that no side inherits another's imports or threads."""
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "side.json"
        command = [sys.executable, __file__, "--side", side, "--result", str(result), "--rounds", str(args.rounds),
                   "--client-workers", str(args.client_workers), "--cpus-per-client", str(args.cpus_per_client),
                   "--client-images", str(args.client_images)]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0 or not result.exists():
            raise SystemExit(f"the {side} side failed (exit {done.returncode}); its output:\n{done.stdout[-4000:]}")
        return json.loads(result.read_text())


def compare(sides: dict[str, dict[str, Any]], workers: int) -> dict[str, float]:
    """One repeat's figures. ``floor``: a steady round's local training spread evenly over the workers
    (what neither framework can go below); ``bound``: the steady ratio ours would reach at the floor.
    ``whole_floor`` / ``whole_bound``: the same when clients are trained whole, as both frameworks do: the
    busiest worker trains ``ceil(PER_ROUND / workers)`` of the round's equal-sized clients."""
    ours, serial, flower = (sides[name] for name in SIDES)
    train = statistics.median(ours["train"][1:] or ours["train"])
    floor = train / workers
    whole_floor = train / PER_ROUND * math.ceil(PER_ROUND / workers)
    round_ours, round_serial, round_flower = steady(ours), steady(serial), steady(flower)
    return {"ours": round_ours, "serial": round_serial, "flower": round_flower, "floor": floor,
            "whole_floor": whole_floor, "ours_above": round_ours - floor, "flower_above": round_flower - floor,
            "ours_above_whole": round_ours - whole_floor,
            "ratio": round_flower / round_ours, "serial_ratio": round_flower / round_serial,
            "bound": round_flower / floor, "whole_bound": round_flower / whole_floor,
            "end_to_end": end_to_end(flower) / end_to_end(ours)}


def spread(values: list[float], unit: str = "", digits: int = 2) -> str:
    """``median [min-max]`` of ``values``."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return (f"{mid:.{digits}f}{unit}" if len(values) == 1
            else f"{mid:.{digits}f}{unit} [{low:.{digits}f}-{high:.{digits}f}]")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client-images", type=int, default=BATCH,
                        help=f"images per client, {BATCH} to {MAX_CLIENT_IMAGES} (default {BATCH}: one local step "
                             f"per round; {MAX_CLIENT_IMAGES}: five)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="the sides run in turn this many times")
    parser.add_argument("--client-workers", type=int, default=os.cpu_count() or 1,
                        help="our simulator's worker processes (default: one per CPU, as Flower's Ray backend)")
    parser.add_argument("--cpus-per-client", type=float, default=1.0,
                        help="Ray CPUs per Flower client (1: up to os.cpu_count() clients train at once)")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 3 or args.repeats < 1:
        raise SystemExit("--rounds must be >= 3 (the first round is start-up) and --repeats >= 1")
    if not BATCH <= args.client_images <= MAX_CLIENT_IMAGES:
        raise SystemExit(f"--client-images must be between {BATCH} (one batch) and {MAX_CLIENT_IMAGES} "
                         f"(the digits split over {NUM_CLIENTS} clients), got {args.client_images}")
    return args


def main() -> None:
    args = parse_args()
    if args.side:
        return run_side(args)
    flwr = require_flower()  # fail before spending time on our side
    workers = min(args.client_workers, PER_ROUND)
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"setting: {METHOD} + {BACKBONE}, digits at {IMAGE_SIZE} px, {NUM_CLIENTS} clients of "
          f"{args.client_images} images, {PER_ROUND} per round, E={EPOCHS}, batch {BATCH} "
          f"({args.client_images // BATCH} step(s) per client), {args.rounds} rounds, 1 torch thread per client; "
          f"ours: {args.client_workers} client worker(s); flwr {flwr.__version__} (Ray backend, "
          f"{args.cpus_per_client:g} CPU per client, {os.cpu_count()} CPUs); {args.repeats} repeat(s), "
          "each side in a fresh process", flush=True)
    figures = []
    for repeat in range(1, args.repeats + 1):
        sides = {name: side_in_subprocess(name, args) for name in SIDES}
        figures.append(compare(sides, workers))
        print(f"repeat {repeat}:")
        for name, result in sides.items():
            print("  " + summary(name, result), flush=True)
    column = {key: [f[key] for f in figures] for key in figures[0]}
    print(f"steady round (median [range] over repeats): ours {spread(column['ours'], ' s', 3)}, "
          f"in series {spread(column['serial'], ' s', 3)}, Flower {spread(column['flower'], ' s', 3)}, "
          f"compute floor {spread(column['floor'], ' s', 3)} (a round's local training spread evenly over "
          f"{workers} worker(s))")
    print(f"above the floor (each framework's own time per round): ours {spread(column['ours_above'], ' s', 3)}, "
          f"Flower {spread(column['flower_above'], ' s', 3)}")
    print(f"bound: with no time of its own above the floor, ours would be {spread(column['bound'], 'x')} faster "
          "per steady round at this setting; the ratio cannot exceed that")
    print(f"whole clients: each client's local training runs in one worker, so the busiest of {workers} worker(s) "
          f"trains {math.ceil(PER_ROUND / workers)} of the {PER_ROUND} clients: floor "
          f"{spread(column['whole_floor'], ' s', 3)}, ours {spread(column['ours_above_whole'], ' s', 3)} above it; "
          f"bound {spread(column['whole_bound'], 'x')} (what a framework with no time of its own would reach)")
    print(f"reference: the clients in series (a plain in-process loop) are {spread(column['serial_ratio'], 'x')} "
          f"faster than Flower per steady round (the target's reference setting: {REFERENCE_LOOP_SPEEDUP}x)")
    print(f"end-to-end (start-up included): Flower / ours = {spread(column['end_to_end'], 'x')}")
    print(f"per steady round: {spread(column['ratio'], 'x')}")
    print(f"flower_speedup: {statistics.median(column['ratio']):.2f}x")


if __name__ == "__main__":
    main()

"""Bytes a round's checkpoint writes: FedEMA with 100 clients, 5 per round, ResNet-18 + BYOL (paper A's
Table 2 row ``byol-cnn:t2-fedema``), in this project's ``FLSimulator`` with its real checkpoints.

FedEMA keeps every client's whole BYOL model (online network, predictor, EMA target: 229.6 MiB with
``resnet18_imagenet``) between its rounds. A round's checkpoint writes the states of the clients that
trained (one file each, ``clients/``) and ``checkpoint.pt`` (the global model, the strategy's state,
RNG states, metrics); states of clients that did not train are not rewritten. The figure is measured:
the bytes the round's checkpoint wrote to disk (the simulator's ``checkpoint_bytes``), set against
the tensors it must hold (K client states + the global model). For comparison the script prints what
one file holding every client's state (this project's earlier checkpoint layout) would have written:
after round r, every client trained so far plus the global model (computed, not measured).

Bytes do not depend on the image size or the data, so the run trains one step of 2 images at 32 px per
client (CPU is fine); ``--storage disk`` (default) keeps the clients' states in files rather than in
host memory, which the bytes also do not depend on.

    PYTHONPATH=src python benchmarks/checkpoint_bytes.py [--clients 100] [--per-round 5] [--rounds 2]
        [--method byol] [--backbone resnet18_imagenet] [--strategy fedema] [--size 32] [--storage disk]

The last line is the figure: ``bytes_per_round: <GiB> GiB ...``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

BATCH = 2  # images per client and step: BatchNorm needs two


def run(args: argparse.Namespace, folder: Path) -> tuple[list[dict], object, object]:
    from dssl.data.imageset import ArrayImageSet
    from dssl.federation import ClientData, FLConfig, FLSimulator, OptimizerConfig, create_strategy
    from dssl.methods import create_method

    torch.manual_seed(0)
    method = create_method(args.method, args.backbone, args.size, 3)
    rng = np.random.default_rng(0)
    images = ArrayImageSet(rng.integers(0, 256, (args.clients * BATCH, args.size, args.size, 3), dtype=np.uint8),
                           np.zeros(args.clients * BATCH, dtype=np.int64), 10)
    clients = [ClientData(images, np.arange(i * BATCH, (i + 1) * BATCH)) for i in range(args.clients)]
    config = FLConfig(rounds=args.rounds, clients_per_round=args.per_round, batch_size=BATCH,
                      optimizer=OptimizerConfig(name="sgd", base_lr=1e-3))
    simulator = FLSimulator(method, clients, create_strategy(args.strategy), config, checkpoint_dir=folder,
                            client_states=args.storage)
    records: list[dict] = []
    result = simulator.run(records.append)
    return records, result, simulator


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--per-round", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--method", default="byol")
    parser.add_argument("--backbone", default="resnet18_imagenet")
    parser.add_argument("--strategy", default="fedema")
    parser.add_argument("--size", type=int, default=32, help="image side (bytes do not depend on it)")
    parser.add_argument("--storage", default="disk", choices=["host", "disk"])
    args = parser.parse_args()
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"setting: {args.strategy}, {args.method} + {args.backbone}, {args.clients} clients, {args.per_round} per "
          f"round, {args.rounds} rounds, client states in {args.storage}")
    from dssl.planning.costs import tensor_bytes

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dssl-checkpoint-bytes-") as folder:
        records, result, simulator = run(args, Path(folder))
        client = max(tensor_bytes(state) for state in simulator.local_states)
        global_model = tensor_bytes(result.global_states)
        trained: set[int] = set()
        print(f"tensors: a client's state {mib(client)}, the global model {mib(global_model)}")
        print(f"{'round':>5} {'clients':>7} {'written':>12} {'tensors':>12} {'metadata':>10} "
              f"{'one file, all clients':>22}")
        for record, chosen in zip(records, result.schedule):
            trained |= set(chosen)
            must_hold = len(chosen) * client + global_model
            one_file = len(trained) * client + global_model
            print(f"{record['round']:>5} {len(chosen):>7} {mib(record['checkpoint_bytes']):>12} {mib(must_hold):>12} "
                  f"{(record['checkpoint_bytes'] - must_hold) / 1024:>7.1f} KiB {mib(one_file):>22}")
    last = records[-1]["checkpoint_bytes"]
    bound = args.per_round * client + global_model
    holds = all(r["checkpoint_bytes"] <= bound + 2**20 for r in records)  # 1 MiB: names, RNG states, metrics
    print(f"wall time: {time.perf_counter() - start:.0f} s")
    print(f"bytes_per_round: {last / 2**30:.3f} GiB ({args.per_round} client states + the global model = "
          f"{bound / 2**30:.3f} GiB of tensors; at most these: {'yes' if holds else 'NO'})")
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())

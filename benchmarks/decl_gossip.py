"""Share of a decentralized (DecL) round spent in gossip, the neighbour averaging of paper A's Algorithm 2.

Setting (the embedded CPU profile at Fig. 2a's client count): SimSiam + cnn_small on random 16x16
single-channel uint8 images, N = 20 clients of 135 samples, every client trains E = 1 local epoch
with batch 32 (the last partial batch dropped, as the simulator does by default), then one gossip
step X <- W X over a random 5-regular graph with the uniform mixing matrix (``DecLSimulator``).

    gossip share = time in the strategy's ``gossip`` (``StackedStates.mix``) / the round's wall time
    outside-training share = (round wall time - local training loops) / round wall time

The second figure counts everything DecL adds around local training: reading each client's row of
the stacked states into the model, the optimizer reset, writing the trained weights back, gossip and
the consensus distance. The round's atomic checkpoint is reported on its own. Medians over the timed
rounds after one warm-up round. Target: gossip share <= 5 %.

Measured on a shared 2-core machine (load average ~27), ``--rounds 2 --threads 1``: round 7.9 s,
gossip 23 ms (148,000 parameters x 20 clients), gossip share 0.30 %, outside local training 2.7 %,
checkpoint 60 ms. One thread by default: with two intra-op threads on an oversubscribed machine the
same run took over ten minutes (threads wait on each other's time slices).

    PYTHONPATH=src python benchmarks/decl_gossip.py [--rounds 4] [--threads 1] [--connectivity 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
import torch

from dssl.data.imageset import ArrayImageSet
from dssl.federation import ClientData, DecLConfig, DecLSimulator, OptimizerConfig, create_strategy
from dssl.methods import create_method
from dssl.topology.graphs import create_graph
from dssl.topology.mixing import mixing_matrix

NUM_CLIENTS, PER_CLIENT, EPOCHS, BATCH, IMAGE_SIZE = 20, 135, 1, 32, 16


def random_clients(seed: int = 0) -> list[ClientData]:
    rng = np.random.default_rng(seed)
    num = NUM_CLIENTS * PER_CLIENT
    images = ArrayImageSet(rng.integers(0, 256, (num, IMAGE_SIZE, IMAGE_SIZE, 1), dtype=np.uint8),
                           rng.integers(0, 10, num), 10)
    return [ClientData(images, np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT)) for i in range(NUM_CLIENTS)]


def measure(rounds: int, connectivity: int, checkpoint_dir: str) -> dict[str, float]:
    graph = create_graph({"topology": "uniform", "connectivity": connectivity}, NUM_CLIENTS, seed=0)
    mixing = mixing_matrix(graph.adjacency, "uniform")
    strategy = create_strategy("fedavg")
    gossip_s: list[float] = []
    gossip = strategy.gossip

    def timed_gossip(*args, **kwargs) -> None:  # the strategy's own gossip, timed
        start = time.perf_counter()
        gossip(*args, **kwargs)
        gossip_s.append(time.perf_counter() - start)

    strategy.gossip = timed_gossip
    torch.manual_seed(0)
    method = create_method("simsiam", "cnn_small", IMAGE_SIZE, 1)
    optimizer = OptimizerConfig(name="sgd", base_lr=0.05, momentum=0.9, weight_decay=1e-4)
    config = DecLConfig(rounds=rounds + 1, local_epochs=EPOCHS, batch_size=BATCH, optimizer=optimizer)
    simulator = DecLSimulator(method, random_clients(), strategy, mixing, config, checkpoint_dir=checkpoint_dir)
    records = simulator.run().metrics[1:]  # round 1 warms up
    timed = gossip_s[1:]
    parameters = simulator.states.floats.shape[1]
    return {
        "gossip_share": statistics.median(g / r["wall_time_s"] for g, r in zip(timed, records)),
        "outside_share": statistics.median((r["wall_time_s"] - r["train_time_s"]) / r["wall_time_s"] for r in records),
        "round_s": statistics.median(r["wall_time_s"] for r in records),
        "gossip_ms": 1e3 * statistics.median(timed),
        "checkpoint_ms": 1e3 * statistics.median(r["checkpoint_s"] for r in records),
        "parameters": parameters,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds (after one warm-up round)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--connectivity", type=int, default=5, help="degree of the random regular graph")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as checkpoint_dir:
        result = measure(args.rounds, args.connectivity, checkpoint_dir)
    print(f"setting: simsiam + cnn_small ({result['parameters']} shared parameters per client), "
          f"{IMAGE_SIZE}x{IMAGE_SIZE}x1, {NUM_CLIENTS} clients x {PER_CLIENT}, {args.connectivity}-regular "
          f"graph, uniform mixing, E={EPOCHS}, batch {BATCH}, {args.threads} threads, {args.rounds} timed rounds")
    print(f"DecL round          {result['round_s'] * 1e3:8.1f} ms   "
          f"(checkpoint after it: {result['checkpoint_ms']:.1f} ms)")
    print(f"gossip              {result['gossip_ms']:8.2f} ms")
    print(f"outside local training: {100 * result['outside_share']:.2f} % of the round")
    print(f"gossip_share: {100 * result['gossip_share']:.2f} %   (target <= 5 %)")


if __name__ == "__main__":
    main()

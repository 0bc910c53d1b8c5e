"""Federated overhead: one FL round of K clients x E epochs vs. the same steps trained centrally.

Setting (the embedded CPU profile): SimSiam + cnn_small on random 16x16 single-channel uint8 images,
10 clients of 135 samples, K = 5 clients per round, E = 2 local epochs, batch 32 (the last partial batch
of each epoch dropped, as the simulator does by default).

    ratio = time of one FL round / time of training the same model for the same number of steps on
            batches of the same size drawn from the same clients' samples, in one plain PyTorch loop

Both sides draw their views from a seeded generator, sum the loss on the device and sync once. The
FL round counts everything the simulator does: loading each client's start state, the optimizer reset,
seeding, the uploads, FedAvg, and (second figure) the atomic checkpoint. Central steps are timed between
FL rounds (in the round callback), so both see the same machine load; medians over rounds are reported.
Target: ratio <= 1.05.

    PYTHONPATH=src python benchmarks/fl_overhead.py [--rounds 8] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
import torch

from dssl.data.imageset import ArrayImageSet
from dssl.federation import ClientData, FLConfig, FLSimulator, OptimizerConfig, create_strategy
from dssl.federation.local import batch_bounds
from dssl.methods import create_method

NUM_CLIENTS, PER_CLIENT, PER_ROUND, EPOCHS, BATCH, IMAGE_SIZE = 10, 135, 5, 2, 32, 16


def random_clients(seed: int = 0) -> list[ClientData]:
    rng = np.random.default_rng(seed)
    num = NUM_CLIENTS * PER_CLIENT
    images = ArrayImageSet(rng.integers(0, 256, (num, IMAGE_SIZE, IMAGE_SIZE, 1), dtype=np.uint8),
                           rng.integers(0, 10, num), 10)
    return [ClientData(images, np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT)) for i in range(NUM_CLIENTS)]


class CentralTrainer:
    """The reference: a plain PyTorch loop over the same number of steps and batch sizes."""

    def __init__(self, optimizer_config: OptimizerConfig):
        torch.manual_seed(1)
        self.model = create_method("simsiam", "cnn_small", IMAGE_SIZE, 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=optimizer_config.lr(BATCH),
                                         momentum=optimizer_config.momentum,
                                         weight_decay=optimizer_config.weight_decay)
        self.generator = torch.Generator().manual_seed(0)

    def train(self, clients: list[ClientData], steps: int) -> tuple[float, int]:
        """Seconds for ``steps`` steps of BATCH images from the union of ``clients``; images seen."""
        pool = np.concatenate([c.indices for c in clients])
        images = clients[0].images
        self.model.train()
        start = time.perf_counter()
        total, seen, done = torch.zeros(()), 0, 0
        while done < steps:
            order = pool[torch.randperm(len(pool), generator=self.generator).numpy()]
            for lo in range(0, len(order) - BATCH + 1, BATCH):
                batch = images.get_batch(order[lo:lo + BATCH]).float().div_(255.0)
                loss = self.model.training_loss(batch, generator=self.generator)["loss"]
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                self.model.after_optimizer_step()
                total = total + loss.detach()
                seen += BATCH
                done += 1
                if done == steps:
                    break
        float(total)
        return time.perf_counter() - start, seen


def measure(rounds: int, checkpoint_dir: str | None) -> dict[str, float]:
    clients = random_clients()
    optimizer = OptimizerConfig(name="sgd", base_lr=0.05, momentum=0.9, weight_decay=1e-4)
    config = FLConfig(rounds=rounds + 1, local_epochs=EPOCHS, batch_size=BATCH, clients_per_round=PER_ROUND,
                      optimizer=optimizer)
    torch.manual_seed(0)
    method = create_method("simsiam", "cnn_small", IMAGE_SIZE, 1)
    simulator = FLSimulator(method, clients, create_strategy("fedavg"), config, checkpoint_dir=checkpoint_dir)
    central = CentralTrainer(optimizer)
    steps = PER_ROUND * EPOCHS * len(batch_bounds(PER_CLIENT, BATCH, drop_last=True))
    timings: list[dict[str, float]] = []

    def after_round(record: dict) -> None:
        chosen = [clients[c] for c in simulator.schedule[record["round"] - 1]]
        seconds, seen = central.train(chosen, steps)
        assert seen == record["images"] and record["steps"] == steps
        timings.append({"fl": record["wall_time_s"], "fl_ckpt": record["wall_time_s"] + record["checkpoint_s"],
                        "train": record["train_time_s"], "central": seconds, "images": seen,
                        "checkpoint": record["checkpoint_s"]})

    simulator.run(on_round_end=after_round)
    kept = timings[1:]  # round 1 warms up both sides
    median = {key: statistics.median(t[key] for t in kept) for key in kept[0]}
    return {
        "ratio": statistics.median(t["fl"] / t["central"] for t in kept),
        "ratio_with_checkpoint": statistics.median(t["fl_ckpt"] / t["central"] for t in kept),
        "fl_round_s": median["fl"], "central_s": median["central"], "checkpoint_ms": 1e3 * median["checkpoint"],
        "non_training_ms": 1e3 * statistics.median(t["fl"] - t["train"] for t in kept),
        # Immune to machine-load noise: what the round adds to its own local-training loops.
        "engine_ratio": statistics.median(t["fl_ckpt"] / t["train"] for t in kept),
        "local_images_per_s": median["images"] / median["train"],
        "fl_images_per_s": median["images"] / median["fl"],
        "central_images_per_s": median["images"] / median["central"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8, help="timed rounds (after one warm-up round)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as checkpoint_dir:
        result = measure(args.rounds, checkpoint_dir)
    print(f"setting: simsiam + cnn_small, {IMAGE_SIZE}x{IMAGE_SIZE}x1, {NUM_CLIENTS} clients x {PER_CLIENT}, "
          f"K={PER_ROUND}, E={EPOCHS}, batch {BATCH}, {args.threads} threads, {args.rounds} timed rounds")
    print(f"FL round            {result['fl_round_s'] * 1e3:8.1f} ms   (outside local training: "
          f"{result['non_training_ms']:.1f} ms; checkpoint: {result['checkpoint_ms']:.1f} ms)")
    print(f"central, same steps {result['central_s'] * 1e3:8.1f} ms")
    print(f"overhead ratio      {result['ratio']:8.3f}   (with checkpoint: {result['ratio_with_checkpoint']:.3f}; "
          "target <= 1.05)")
    print(f"round / its local training loops, checkpoint included: {result['engine_ratio']:.3f}")
    print(f"images/s            local training {result['local_images_per_s']:.0f}, FL round "
          f"{result['fl_images_per_s']:.0f}, central {result['central_images_per_s']:.0f}")


if __name__ == "__main__":
    main()

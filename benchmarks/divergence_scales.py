"""FedEMA's and FedU's divergence on real training: the paper's difference ||W_g - W_k|| in the code's norm
(``divergence: paper``, the mean of per-kernel L2 norms over the encoder's convolutions, what paper B's constants
were tuned on) against the flattened norm (``paper_flat``), and what each does to FedU's threshold and to a
constant lambda. With ``--per-round`` below ``--clients`` it also shows FedEMA under client sampling: the
divergence to a client's kept model grows with the rounds it skipped, unless it restarts (``skipped``).

Setting (default: the embedded profile's paper-B cells): BYOL on cnn_small, scikit-learn's digits at 16 px,
5 clients holding 2 whole classes each, every client every round, 10 rounds of 1 local epoch, batch 32,
SGD lr 0.05. Every blend FedEMA makes is measured in both norms on the same weights.

    PYTHONPATH=src python benchmarks/divergence_scales.py [--backbone cnn_small] [--rounds 10]
        [--clients 5] [--per-round 5] [--skipped restart] [--images 1797]

Figure lines: ``ratio flat/paper: min .. max (median)``, then per norm ``FedU global predictor`` (share of
participations under the 0.4 threshold) and ``lambda 0.8 mu`` (mean mu and the share saturated at 1).
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
import torch

from dssl.config.strategies.fedema import FedEMAConfig
from dssl.data.imageset import ArrayImageSet
from dssl.data.partition import create_partition
from dssl.federation import ClientData, FLConfig, FLSimulator, OptimizerConfig
from dssl.federation.strategies.base import LOCAL_MODEL
from dssl.federation.strategies.divergence import LAST_ROUND, code_norm_keys, l2_distance, mean_layer_distance
from dssl.federation.strategies.fedema import FedEMA
from dssl.methods import create_method

THRESHOLD, LAMBDA = 0.4, 0.8   # paper B's code: FedU's threshold, FedEMA's constant lambda


class MeasuredFedEMA(FedEMA):
    """FedEMA (autoscaled, as configured) that also measures, at every blend, the divergence in both norms."""

    def __init__(self, config: FedEMAConfig) -> None:
        super().__init__(config)
        self.records: list[dict] = []

    def setup(self, method) -> None:
        super().setup(method)
        self.kernels = code_norm_keys(method, self.online_keys)
        self.flat = tuple(k for k in self.online_keys if k in self.param_keys)

    def client_update_start(self, client_id, global_state, local_state, ctx):
        kept = local_state.get(LOCAL_MODEL)
        if kept is not None:
            self.records.append({"round": ctx.round, "gap": ctx.round - local_state.get(LAST_ROUND, ctx.round - 1),
                                 "paper": mean_layer_distance(global_state, kept, self.kernels),
                                 "paper_flat": l2_distance(global_state, kept, self.flat)})
        return super().client_update_start(client_id, global_state, local_state, ctx)


def digits_clients(num_clients: int, count: int) -> list[ClientData]:
    """The first ``count`` of scikit-learn's 1,797 digits (8 x 8; the views are drawn at the model's size),
    2 whole classes per client."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    labels = digits.target[:count].astype(np.int64)
    pixels = (digits.images[:count] * (255 / 16)).round().astype(np.uint8)[..., None]
    images = ArrayImageSet(pixels, labels, 10)
    spec = {"scheme": "k_classes", "classes_per_client": 2, "clients": num_clients}
    partition = create_partition(labels, spec, seed=0)
    return [ClientData(images, indices) for indices in partition.client_indices]


def summary(records: list[dict]) -> list[str]:
    ratios = [r["paper_flat"] / r["paper"] for r in records if r["paper"] > 0]
    lines = [f"blends measured: {len(records)}",
             f"ratio flat/paper: {min(ratios):.2f} .. {max(ratios):.2f} (median {statistics.median(ratios):.2f})"]
    for norm in ("paper", "paper_flat"):
        values = [r[norm] for r in records]
        mus = [min(LAMBDA * v, 1.0) for v in values]
        lines.append(f"{norm:<10} divergence {min(values):.3f} .. {max(values):.3f}; FedU global predictor "
                     f"{100 * np.mean([v < THRESHOLD for v in values]):.0f} %; lambda {LAMBDA} mu mean "
                     f"{np.mean(mus):.2f}, saturated {100 * np.mean([m >= 1.0 for m in mus]):.0f} %")
    gaps = sorted({r["gap"] for r in records})
    if gaps != [1]:
        for gap in gaps:
            values = [r["paper"] for r in records if r["gap"] == gap]
            lines.append(f"gap {gap:>2} rounds: paper divergence mean {np.mean(values):.3f} ({len(values)} blends)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="cnn_small")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--images", type=int, default=1797, help="the first N digits (all 1,797 by default)")
    parser.add_argument("--skipped", default="blend", choices=["restart", "blend"],
                        help="blend (default here) measures every return, however long the gap")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    method = create_method("byol", args.backbone, args.image_size, 1)   # digits: one channel
    strategy = MeasuredFedEMA(FedEMAConfig(aggregation="data_size", skipped=args.skipped))
    config = FLConfig(rounds=args.rounds, clients_per_round=args.per_round, local_epochs=args.epochs,
                      batch_size=args.batch, seed=0,
                      optimizer=OptimizerConfig(name="sgd", base_lr=args.lr * 256 / args.batch, weight_decay=1e-4))
    FLSimulator(method, digits_clients(args.clients, args.images), strategy, config).run()
    print(f"BYOL + {args.backbone}, {args.clients} clients x 2 classes, {args.per_round} per round, "
          f"{args.rounds} rounds x {args.epochs} epoch(s), batch {args.batch}")
    for line in summary(strategy.records):
        print(line)


if __name__ == "__main__":
    main()

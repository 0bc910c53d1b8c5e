"""A paper profile at miniature length, and the small datasets it runs on.

``miniature(params, roots)`` derives a params file from a paper profile by overriding lengths and sizes
only: the first seed, one round of at most two clients, one epoch, no warm-up, one batch of at most 64
images, a small image side, fewer clients per partition (clients a grid names by number keep their
place: the first stays first, the last last), a short theory sweep, the step options of a CPU (fp32),
and the dataset folders the test wrote. Every grid, model, strategy, partition, graph, protocol and
report section stays as the profile states it, so the run expands to the profile's full DAG with the
real ResNet-18 and Tiny-ViT architectures.

Why one seed: a second seed doubles every training and evaluation (most of the run's time) and proves
nothing more here: each cell still runs every seed the file lists (the test compares the tables' counts
with them), and a claim's pairing of seeds, its interval and verdict are the CI profile's (two and three
seeds, tests/pipeline/test_pipeline_e2e.py) and the report's own tests.

Why fewer clients: a label-skewed partition floors each client's Dirichlet share of each class, so 100
clients need ~800 images before none is empty, DecL trains on all of them every round, and FedU /
FedEMA keep every client's BYOL networks in memory (~135 MB each). A partition a graph is built on
keeps one client more than its densest graph's |A|, rounded up to an even count (12 for paper A's
|A| = 10; the theory's N and c follow), the others 10; then 160 images leave no client empty.

The datasets are written in their real formats: CIFAR-10/100 as the python version's tarball (pickled
batches in ``cifar-10-python.tar.gz`` / ``cifar-100-python.tar.gz``, a few images per class, read with
``verify_md5: false`` since they are not the official release), Mini-ImageNet and ImageNet as JPEG
ImageFolder trees (ImageNet with its val/ split sorted into class folders).
"""

from __future__ import annotations

import copy
import io
import pickle
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

IMAGE_SIDE = 16          # images of this side, or larger where a backbone needs it:
BACKBONE_SIDE = {"tiny_vit": 28}   # a multiple of Tiny-ViT's 14 px patch with 2 x 2 patches (MAE masks 3)
BATCH = 64               # a client's or a small dataset's images in one step
CLIENTS_PER_ROUND = 2
CLIENTS = 10             # per partition no graph is built on
LENGTHS = {"rounds": 1, "local_epochs": 1, "epochs": 1, "warmup_epochs": 0}
CPU_STEP = {"device": "cpu", "precision": "fp32", "channels_last": False, "compile": False}
THEORY_DIMENSIONS = 2    # the sweep's smallest dimensions, d
SEEDS = 1                # the profile's first seed (module docstring: why one)


def miniature(params: dict, roots: dict[str, str]) -> dict:
    """The profile ``params`` at miniature length, reading dataset ``name`` from ``roots[name]``."""
    mini = copy.deepcopy(params)
    mini["seeds"] = mini["seeds"][:SEEDS]
    _fewer_clients(mini)
    side = max(BACKBONE_SIDE.get(spec["backbone"], IMAGE_SIDE) for spec in mini["models"].values())
    for name, spec in mini["datasets"].items():
        spec = mini["datasets"][name] = dict(spec or {})
        spec["root"] = roots[name]
        if name.startswith("cifar"):
            spec["verify_md5"] = False
        if "image_size" in spec:
            spec["image_size"] = min(spec["image_size"], side)
    mini["pretrain"]["image_size"] = min(mini["pretrain"]["image_size"], side)
    for section in ("pretrain", "strategies", "evaluate"):
        _shorten(mini[section])
    theory = mini.get("theory")
    if theory:
        graph = mini["graphs"][theory["graphs"][0]]  # the theory's N is its graphs' client count
        clients = mini["partitions"][graph["partition"]]["clients"]
        theory["c"] = max(2 * clients, theory["c"] * clients // theory["N"])  # paper A: c >= 2N
        theory["N"] = clients
        theory["d_values"] = sorted(theory["d_values"])[:THEORY_DIMENSIONS]
        theory["seeds"] = theory["seeds"][:1]
        if "improvement" in theory:
            theory["improvement"]["d"] = theory["d_values"][0]
    return mini


def _fewer_clients(mini: dict) -> None:
    """A partition a graph is built on keeps one client more than its densest graph's |A| (rounded up to
    an even count), any other at most ``CLIENTS``; a client named by number (stand-alone training, Table 5's
    distances) moves to the same place among them: the first stays first, the last stays last."""
    before = {name: spec["clients"] for name, spec in mini["partitions"].items()}
    densest: dict[str, int] = {}
    for graph in (mini.get("graphs") or {}).values():
        densest[graph["partition"]] = max(densest.get(graph["partition"], 1), int(graph.get("connectivity", 1)))
    for name, spec in mini["partitions"].items():
        # an even count: a regular graph of degree |A| - 1 on N clients needs N * (|A| - 1) even
        graph_clients = densest.get(name, 0) + 1 + (densest.get(name, 0) + 1) % 2
        spec["clients"] = min(spec["clients"], graph_clients if name in densest else CLIENTS)

    def moved(clients: list[int], partitions: list[str]) -> list[int]:
        total = max(before[p] for p in partitions)
        kept = max(mini["partitions"][p]["clients"] for p in partitions)
        return [round(c * (kept - 1) / max(total - 1, 1)) for c in clients]

    local = mini["pretrain"].get("local") or {}
    for partition, clients in (local.get("clients") or {}).items():
        local["clients"][partition] = moved(clients, [partition])
    for section in ("weight_distance", "features"):   # Table 5's and Fig. 3's two stand-alone clients
        spec = mini.get(section) or {}
        if spec.get("clients"):
            partitions = [p for grid in spec["grids"].values() for p in grid["partitions"]]
            spec["clients"] = moved(spec["clients"], partitions)


def _shorten(node: Any) -> None:
    """Every length, batch size and step option inside ``node``, at any depth (a train section, a
    strategy's train override, a protocol and its per-dataset and per-family overrides)."""
    if isinstance(node, list):
        for item in node:
            _shorten(item)
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in LENGTHS and isinstance(value, int):
            node[key] = LENGTHS[key]
        elif key == "batch_size" and isinstance(value, int):
            node[key] = min(value, BATCH)
        elif key == "clients_per_round" and isinstance(value, int):
            node[key] = min(value, CLIENTS_PER_ROUND)
        elif key in CPU_STEP:
            node[key] = CPU_STEP[key]
        else:
            _shorten(value)


# ----------------------------------------------------------------------------------------- datasets


def _images(labels: np.ndarray, side: int, rng: np.random.Generator) -> np.ndarray:
    """[N, side, side, 3] uint8: a colour per class, a bright square at a class-dependent place, noise."""
    colours = np.random.default_rng(0).integers(40, 216, size=(int(labels.max()) + 1, 3))
    images = colours[labels][:, None, None, :] + rng.normal(0, 24, size=(len(labels), side, side, 3))
    for i, label in enumerate(labels):
        top, left = (label * 7) % (side // 2), (label * 3) % (side // 2)
        images[i, top:top + side // 2, left:left + side // 2] += 60
    return np.clip(images, 0, 255).astype(np.uint8)


def _per_class(classes: int, each: int) -> np.ndarray:
    return np.repeat(np.arange(classes), each)


CIFAR = {  # torchvision's names for the python version
    "cifar10": {"folder": "cifar-10-batches-py", "tarball": "cifar-10-python.tar.gz", "classes": 10,
                "train": [f"data_batch_{i}" for i in range(1, 6)], "test": "test_batch", "labels": "labels",
                "meta": "batches.meta", "names": "label_names"},
    "cifar100": {"folder": "cifar-100-python", "tarball": "cifar-100-python.tar.gz", "classes": 100,
                 "train": ["train"], "test": "test", "labels": "fine_labels", "meta": "meta",
                 "names": "fine_label_names"},
}


def write_cifar(root: Path, name: str, train_each: int, test_each: int, classes: int | None = None,
                seed: int = 0) -> Path:
    """``root/<tarball>`` in CIFAR's python format: ``train_each`` / ``test_each`` images of each of the
    first ``classes`` classes (default: all; the label names list every class either way)."""
    layout, rng = CIFAR[name], np.random.default_rng(seed)
    members: dict[str, dict] = {}
    present = classes or layout["classes"]
    train = _per_class(present, train_each)
    shares = np.array_split(rng.permutation(len(train)), len(layout["train"]))
    for file, share in zip(layout["train"], shares):
        members[file] = _batch(layout, train[np.sort(share)], rng)
    members[layout["test"]] = _batch(layout, _per_class(present, test_each), rng)
    members[layout["meta"]] = {layout["names"]: [f"class_{c}" for c in range(layout["classes"])]}
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(root / layout["tarball"], "w:gz") as archive:
        for file, content in members.items():
            data = pickle.dumps(content, protocol=2)
            info = tarfile.TarInfo(f"{layout['folder']}/{file}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return root


def _batch(layout: dict, labels: np.ndarray, rng: np.random.Generator) -> dict:
    images = _images(labels, 32, rng)  # CIFAR's rows: 1024 red, 1024 green, 1024 blue values
    rows = images.transpose(0, 3, 1, 2).reshape(len(labels), 3 * 32 * 32)
    return {"batch_label": "miniature", layout["labels"]: labels.tolist(), "data": rows,
            "filenames": [f"image_{i}.png" for i in range(len(labels))]}


def write_image_folder(root: Path, classes: int, splits: dict[str, int], side: int = 32, seed: int = 0) -> Path:
    """``root/<split>/<class>/<i>.JPEG``: ``splits[split]`` JPEG images per class."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    names = [f"n{c:08d}" for c in range(classes)]
    for split, each in splits.items():
        labels = _per_class(classes, each)
        for i, (label, image) in enumerate(zip(labels, _images(labels, side, rng))):
            folder = root / split / names[label]
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(image).save(folder / f"{i}.JPEG", quality=90)
    return root


def write_datasets(root: Path, names: list[str]) -> dict[str, str]:
    """Every dataset a profile names, written under ``root``; returns each one's folder."""
    writers = {
        "cifar10": lambda folder: write_cifar(folder, "cifar10", train_each=4, test_each=2),
        "cifar100": lambda folder: write_cifar(folder, "cifar100", train_each=2, test_each=1, classes=20),
        # 10 classes of 20 images (a fifth carved out as the test split): no client of a label-skewed
        # partition of 10 or 20 clients is empty
        "mini_imagenet": lambda folder: write_image_folder(folder, 10, {"train": 20}),
        "imagenet": lambda folder: write_image_folder(folder, 10, {"train": 3, "val": 1}),
    }
    return {name: str(writers[name](root / name)) for name in names}

"""Synthetic evaluation result files for the reporting tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FAMILY = {"cnn_small": "cnn", "resnet18_imagenet": "cnn", "vit_small": "vit"}
FL_PARTITIONS = {"iid": "fl-iid", "dirichlet_balanced": "fl-label", "dirichlet_min_size": "fl-label-minsize",
                 "feature": "fl-feature"}


def result(framework: str = "fl", method: str | None = "simsiam", backbone: str = "cnn_small",
           scheme: str | None = "iid", dataset: str = "digits", protocol: str = "finetune",
           test_acc: float = 0.5, seed: int = 0, **overrides: Any) -> dict[str, Any]:
    """One result record as an evaluate stage writes it; ``overrides`` replace any key."""
    family = FAMILY[backbone]
    record = {
        "framework": framework, "model": f"{method}-{family}" if method else None, "method": method,
        "backbone": backbone, "family": family,
        "partition": FL_PARTITIONS[scheme] if framework == "fl" else None,
        "scheme": scheme if framework == "fl" else None,
        "alpha": 0.1 if framework == "fl" and scheme.startswith("dirichlet") else None,
        "graph": None, "topology": None, "connectivity": None,
        "dataset": dataset, "protocol": protocol, "test_acc": test_acc, "val_acc": test_acc, "seed": seed,
        **overrides,
    }
    name = "-".join(filter(None, (record["model"] or backbone, record["graph"] or record["partition"])))
    record.setdefault("stage", f"evaluate_{framework}@{name}-{dataset}-{protocol}")
    return record


def decl_result(topology: str, connectivity: float, test_acc: float, seed: int = 0,
                **overrides: Any) -> dict[str, Any]:
    """A DecL fine-tune result of MAE + ViT on the 20-client label-skew partition and one graph."""
    fields = {"partition": "decl-label", "scheme": "dirichlet_balanced", "alpha": 0.1,
              "graph": "complete" if topology == "complete" else f"{topology}-{connectivity:g}",
              "topology": topology, "connectivity": connectivity, **overrides}
    return result("decl", "mae", "vit_small", test_acc=test_acc, seed=seed, **fields)


def write_results(folder: Path, records: list[dict[str, Any]]) -> Path:
    """Write each record as its own JSON file, spread over two sub-folders (loading is recursive)."""
    for index, record in enumerate(records):
        path = folder / ("fl" if record["framework"] == "fl" else "other") / f"result-{index:03d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))
    return folder


def write_features(folder: Path, model: str, partition: str = "fl-label", strategy: str = "fedavg",
                   seed: int = 0, clients: tuple[int, ...] = (0, 3), per_class: int = 5) -> Path:
    """A features stage's output for one FL cell: a 2-D embedding of test images per model (clusters by
    class) and its features.json."""
    import numpy as np
    import pandas as pd

    cell = folder / model / partition / strategy
    cell.mkdir(parents=True, exist_ok=True)
    models = [f"local {c + 1}" for c in clients] + ["global"]
    rng = np.random.default_rng(seed)
    rows = [{"model": name, "index": 10 * label + i, "label": label, "x": label + rng.normal(0, 0.1),
             "y": -label + rng.normal(0, 0.1)} for name in models for label in range(3) for i in range(per_class)]
    pd.DataFrame(rows).to_csv(cell / "embedding.csv", index=False)
    (cell / "features.json").write_text(json.dumps({
        "stage": f"features@{model}-{partition}-{strategy}", "model": model, "partition": partition,
        "strategy": strategy, "seed": seed, "clients": list(clients), "dataset": "digits", "split": "test",
        "images": 3 * per_class, "models": models, "embedding": "PCA to 20 dimensions, then 2-D t-SNE"}))
    return cell


SEEDS = (0, 1, 2)
NOISE = (0.0, 0.01, -0.01)
# Every kind of section with a figure, on constructed cells (names as params.yaml would give them)
REPORT_SECTIONS = {
    "pretraining_gain": {},
    "table1": {},
    "fig2a": {},
    "fig2b": {"model": "mae-vit", "rows": {"MAE": "fedavg", "MAR": "fedmar"},
              "columns": {"alpha=1e5 (IID)": "fl-iid", "alpha=0.1": "fl-label"}},
    "table8": {"model": "mae-vit", "rows": {"0": "fedavg", "cosine_0.1_to_0.001": "fedmar"},
               "columns": {"cifar100": "fl-label"}},
    "fig3": {"partition": "fl-label",
             "columns": {"SimSiam + CNN": "simsiam-cnn:fedavg", "MAE + ViT": "mae-vit:fedavg"}},
    "partitions_and_graphs": {},
    "theory": {},
    "lineage": {},
}


def report_records() -> list[dict[str, Any]]:
    """Three seeds of: SimSiam + CNN and MAE + ViT in FL (fedavg on IID and label skew; MAE + ViT also
    fedmar), DecL MAE + ViT on three graphs, the random-init backbones; every cell fine-tuned."""
    records = []
    for seed, noise in zip(SEEDS, NOISE):
        for method, backbone, base in (("simsiam", "cnn_small", 0.80), ("mae", "vit_small", 0.70)):
            for scheme, drop in (("iid", 0.0), ("dirichlet_balanced", -0.03)):
                for strategy, gain in (("fedavg", 0.0), ("fedmar", 0.02)):
                    if strategy == "fedmar" and method != "mae":
                        continue
                    records.append(result("fl", method, backbone, scheme, test_acc=base + drop + gain + noise,
                                          seed=seed, strategy=strategy, n_test=450))
        for backbone, acc in (("cnn_small", 0.60), ("vit_small", 0.55)):
            records.append(result("random", None, backbone, None, test_acc=acc + noise, seed=seed, n_test=450))
        for topology, connectivity, acc in (("uniform", 3, 0.62), ("uniform", 10, 0.66), ("complete", 20, 0.68)):
            records.append(decl_result(topology, connectivity, acc + noise, seed=seed, strategy="decl-uniform"))
    return records


def build_report(root: Path) -> Path:
    """Write a report of every figure kind from constructed results into ``root / "reports"`` (with a
    partition heatmap and a theory figure beside it, as other stages draw them); returns that folder."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dssl.reporting.readme import write_report

    reports = root / "reports"
    for drawing in ("figures/partitions/fl-label.png", "theory/improvement.png"):
        (reports / drawing).parent.mkdir(parents=True, exist_ok=True)
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.plot([0, 1], [1, 0])
        fig.savefig(reports / drawing)
        plt.close(fig)
    write_results(root / "results", report_records())
    for model in ("simsiam-cnn", "mae-vit"):
        write_features(root / "features", model)
    context = {"profile": "embedded", "dataset": "digits", "features": root / "features",
               "theory": "Theory summary. Figures: [adding edges](theory/improvement.png).",
               "data_figures": {"partitions": {"fl-label": ("figures/partitions/fl-label.png",
                                                            "dirichlet_balanced split of digits over 4 clients")}},
               "settings": {"Seeds": "0, 1, 2", "Models": ["`mae-vit`: mae on vit_small"]},
               "run": {"pretraining": "digits at 16 px", "stages": 12, "stage_seconds": 30.0, "wall_seconds": 33.0}}
    write_report(root / "results", reports, REPORT_SECTIONS, context)
    return reports

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
    record.setdefault("mlflow_run_id", f"run-{framework}-{name}-{protocol}-s{seed}")
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

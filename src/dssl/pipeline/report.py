"""Stage ``report``: paper A's Table 1 and Fig. 2a (and the theory section) from the evaluation
results, beside the paper's numbers, in ``reports/``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dssl.pipeline.common import Stage, atomic_dir
from dssl.pipeline.layout import METRICS

REPORTS = Path("reports")
THEORY_SUMMARY = REPORTS / "theory" / "summary.md"


def strategy_text(spec: dict) -> str:
    """``fedavg (aggregation=uniform)``: a strategy mapping as params.yaml states it."""
    options = ", ".join(f"{k}={v}" for k, v in spec.items() if k != "name")
    return f"{spec['name']} ({options})" if options else spec["name"]


def settings(params: dict) -> dict[str, object]:
    """The settings a reader needs to interpret the numbers, as params.yaml states them."""
    pretrain, partitions = params["pretrain"], params["partitions"]
    fl, decl, central = pretrain["fl"], pretrain["decl"], pretrain["central"]
    models = params["models"]
    return {
        "pretraining dataset": pretrain["dataset"],
        "image size (px)": pretrain["image_size"],
        "FL clients": sorted({partitions[p]["clients"] for p in fl["partitions"]}),
        "FL clients per round": fl["train"]["clients_per_round"],
        "FL rounds x local epochs": f"{fl['train']['rounds']} x {fl['train']['local_epochs']}",
        "FL strategy": strategy_text(fl["strategy"]),
        "label non-IID": ", ".join(f"{p}: {partitions[p]['scheme']} alpha={partitions[p].get('alpha')}"
                                   for p in fl["partitions"] if "alpha" in partitions[p]),
        "DecL clients / graphs": f"{partitions[decl['partition']]['clients']} / {', '.join(decl['graphs'])}",
        "DecL rounds x local epochs": f"{decl['train']['rounds']} x {decl['train']['local_epochs']}",
        "DecL strategy": strategy_text(decl["strategy"]),
        "central epochs": central["train"]["epochs"],
        "models": ", ".join(f"{m} = {models[m]['method']} on {models[m]['backbone']}" for m in models),
        "evaluation protocols": ", ".join(f"{k}: {'/'.join(v)}" for k, v in params["evaluate"]["protocols"].items()),
    }


def run(params_path: Path | str) -> Path:
    stage = Stage("report", "", params_path)
    params = stage.params
    from dssl.reporting.readme import write_report

    theory = THEORY_SUMMARY.read_text() if THEORY_SUMMARY.exists() else None
    report = params.get("report") or {}
    context = {
        "profile": stage.profile,
        "dataset": report.get("dataset", params["evaluate"]["datasets"][0]),
        "protocol": report.get("table1_protocol", "finetune"),
        "settings": settings(params),
        "theory": theory,
    }
    # Build everything in a scratch folder first: a failure leaves the previous report intact.
    build = REPORTS / ".report-build"
    with atomic_dir(build) as tmp:
        written = [Path(p).relative_to(tmp) for p in write_report(METRICS, tmp, context).values()]
    for name in written:
        (REPORTS / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(build / name, REPORTS / name)
    shutil.rmtree(build, ignore_errors=True)
    artifacts = [REPORTS / name for name in written]
    stage.log({"report": report, "profile": stage.profile}, {}, artifacts=artifacts, inputs=[METRICS])
    return REPORTS / "README.md"

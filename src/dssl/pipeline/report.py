"""Stage ``report``: the sections ``report.sections`` lists (paper tables and figures, the pretraining
gain over random init, the theory summary), beside the papers' numbers, in ``reports/``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dssl.pipeline.common import Stage, atomic_dir
from dssl.pipeline.layout import METRICS

REPORTS = Path("reports")
THEORY_SUMMARY = REPORTS / "theory" / "summary.md"


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
        "FL aggregation": fl["train"]["aggregation"],
        "label non-IID": ", ".join(f"{p}: {partitions[p]['scheme']} alpha={partitions[p].get('alpha')}"
                                   for p in fl["partitions"] if "alpha" in partitions[p]),
        "DecL clients / graphs": f"{partitions[decl['partition']]['clients']} / {', '.join(decl['graphs'])}",
        "DecL rounds x local epochs": f"{decl['train']['rounds']} x {decl['train']['local_epochs']}",
        "DecL mixing": decl["train"]["mixing"],
        "central epochs": central["train"]["epochs"],
        "models": ", ".join(f"{m} = {models[m]['method']} on {models[m]['backbone']}" for m in models),
        "evaluation protocols": ", ".join(f"{k}: {'/'.join(v)}" for k, v in params["evaluate"]["protocols"].items()),
    }


DEFAULT_SECTIONS = {"pretraining_gain": {}, "table1": {}, "fig2a": {}, "theory": {}, "lineage": {}}


def run(params_path: Path | str) -> Path:
    stage = Stage("report", "", params_path)
    params = stage.params
    from dssl.reporting.readme import write_report
    from dssl.reporting.sections import FOLDER, check_sections_or_raise

    check_sections_or_raise(params, str(params_path))
    theory = THEORY_SUMMARY.read_text() if THEORY_SUMMARY.exists() else None
    report = params.get("report") or {}
    sections = report.get("sections") or DEFAULT_SECTIONS
    context = {
        "profile": stage.profile,
        "dataset": report.get("dataset", params["evaluate"]["datasets"][0]),
        "settings": settings(params),
        "theory": theory,
    }
    # Build everything in a scratch folder first: a failure leaves the previous report intact.
    build = REPORTS / ".report-build"
    with atomic_dir(build) as tmp:
        written = [Path(p).relative_to(tmp) for p in write_report(METRICS, tmp, sections, context).values()]
    shutil.rmtree(REPORTS / FOLDER, ignore_errors=True)   # no stale section files survive
    os.replace(build / FOLDER, REPORTS / FOLDER)
    os.replace(build / "README.md", REPORTS / "README.md")
    shutil.rmtree(build, ignore_errors=True)
    artifacts = [REPORTS / name for name in written]
    stage.log({"report": report, "profile": stage.profile}, {}, artifacts=artifacts, inputs=[METRICS])
    return REPORTS / "README.md"

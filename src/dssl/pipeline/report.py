"""Stage ``report``: the sections ``report.sections`` lists (paper tables and figures, the pretraining
gain over random init, the theory summary), beside the papers' numbers, in ``reports/``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dssl.pipeline.common import Stage, atomic_dir
from dssl.pipeline.layout import DISTANCES, GRAPHS, METRICS

REPORTS = Path("reports")
THEORY_SUMMARY = REPORTS / "theory" / "summary.md"


def strategy_text(spec: dict) -> str:
    """``fedavg (aggregation=uniform)``: a strategy mapping as params.yaml states it."""
    options = ", ".join(f"{k}={v}" for k, v in spec.items() if k != "name")
    return f"{spec['name']} ({options})" if options else spec["name"]


def is_iid(spec: dict) -> bool:
    """An even random split, or a Dirichlet at paper A's IID concentration (alpha >= 1e5)."""
    from dssl.data.partition import IID_ALPHA

    return spec["scheme"] == "iid" or ("alpha" in spec and float(spec["alpha"]) >= IID_ALPHA)


def partition_text(spec: dict) -> str:
    """``dirichlet_balanced alpha=0.1``: a partition's scheme and options as params.yaml states them."""
    options = " ".join(f"{k}={v}" for k, v in spec.items() if k not in ("dataset", "scheme", "clients", "seed"))
    return f"{spec['scheme']} {options}".strip()


def settings(params: dict) -> dict[str, object]:
    """The settings a reader needs to interpret the numbers, as params.yaml states them."""
    from dssl.config.grids import grid_cells

    pretrain, partitions, graphs = params["pretrain"], params["partitions"], params.get("graphs") or {}
    fl, decl, central = pretrain["fl"], pretrain["decl"], pretrain["central"]
    fl_cells, decl_cells = grid_cells(params, "fl"), grid_cells(params, "decl")
    fl_partitions = sorted({p for _, p, _ in fl_cells})
    decl_partitions = sorted({(graphs.get(g) or {}).get("partition") or g for _, g, _ in decl_cells})
    models = params["models"]
    local = pretrain.get("local") or {}
    return {
        "pretraining dataset": pretrain["dataset"],
        "image size (px)": pretrain["image_size"],
        "FL clients": sorted({partitions[p]["clients"] for p in fl_partitions}),
        "FL clients per round": fl["train"]["clients_per_round"],
        "FL rounds x local epochs": f"{fl['train']['rounds']} x {fl['train']['local_epochs']}",
        "IID": ", ".join(f"{p}: {partition_text(partitions[p])}" for p in fl_partitions if is_iid(partitions[p])),
        "label non-IID": ", ".join(f"{p}: {partition_text(partitions[p])}"
                                   for p in fl_partitions if "alpha" in partitions[p] and not is_iid(partitions[p])),
        "DecL clients": sorted({partitions[p]["clients"] for p in decl_partitions if p in partitions}),
        "DecL rounds x local epochs": f"{decl['train']['rounds']} x {decl['train']['local_epochs']}",
        "strategies": "; ".join(f"{name} = {strategy_text(spec)}" for name, spec in params["strategies"].items()),
        "grids": ", ".join(f"{fw}.{g}" for fw in ("fl", "decl", "local")
                           for g in (pretrain.get(fw) or {}).get("grids", {})),
        "central epochs": central["train"]["epochs"],
        **({"stand-alone (local) epochs": local["train"]["epochs"]} if local else {}),
        "models": ", ".join(f"{m} = {models[m]['method']} on {models[m]['backbone']}" for m in models),
        "evaluation protocols": ", ".join(f"{k}: {'/'.join(v)}" for k, v in params["evaluate"]["protocols"].items()),
        "seeds": params["seeds"],
    }


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
        "weight_distances": DISTANCES,   # every weight_distance output (Table 5)
        "graphs": GRAPHS,                # every graph's statistics (Table 6: the mixing rules' distances)
        "models": params["models"], "strategies": params["strategies"],   # what each row ran
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

"""Stage ``report``: the sections ``report.sections`` lists (paper tables and figures, the pretraining
gain over random init, the theory summary), beside the papers' numbers, in ``reports/``: README.md, its
HTML rendering README.html (figures inlined), the sections' CSVs and the figures (DVC plots)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from dssl.pipeline.common import Stage, atomic_dir
from dssl.pipeline.layout import DISTANCES, FEATURES, GRAPHS, METRICS, graph_figure, partition_figure

REPORTS = Path("reports")
THEORY_SUMMARY = REPORTS / "theory" / "summary.md"


def _entry_text(spec: dict) -> str:
    """``fedavg (aggregation=uniform)``: a strategy mapping as params.yaml states it."""
    options = ", ".join(f"{k}={v}" for k, v in spec.items() if k != "name")
    return f"{spec['name']} ({options})" if options else spec["name"]


def _schedule(train: dict) -> str:
    """A training schedule as params.yaml states it: "20 rounds x 1 local epoch, 5 clients per round, batch 32"."""
    parts = []
    if "rounds" in train:
        epochs = train.get("local_epochs", 1)
        parts.append(f"{train['rounds']} rounds x {epochs} local epoch{'' if epochs == 1 else 's'}")
    if "epochs" in train:
        parts.append(f"{train['epochs']} epochs")
    if "clients_per_round" in train:
        parts.append(f"{train['clients_per_round']} clients per round")
    if "batch_size" in train:
        parts.append(f"batch {train['batch_size']}")
    return ", ".join(parts)


def _grid_lines(framework: str, grids: dict, place: str) -> list[str]:
    lines = []
    for name, grid in (grids or {}).items():
        axes = [grid.get("models") or [], grid.get(place) or [],
                *([grid.get("strategies")] if "strategies" in grid else [])]
        count = 1
        for axis in axes:
            count *= len(axis)
        seeds = f", seeds {', '.join(map(str, grid['seeds']))}" if "seeds" in grid else ""
        lines.append(f"`{framework}.{name}`: " + " x ".join(", ".join(map(str, axis)) for axis in axes)
                     + f" ({count} cell{'s' * (count != 1)}{seeds})")
    return lines


def _partition_text(spec: dict) -> str:
    options = ", ".join(f"{k} {v}" for k, v in spec.items() if k not in ("dataset", "scheme", "clients", "seed"))
    return (f"{spec['scheme']} split of {spec['dataset']} over {spec['clients']} clients"
            + (f", {options}" if options else "") + f" (seed {spec.get('seed', 0)})")


def _graph_text(spec: dict) -> str:
    connectivity = f", |A| = {spec['connectivity']}" if "connectivity" in spec else ""
    return (f"{spec['topology']} graph over the clients of {spec['partition']}{connectivity} "
            f"(seed {spec.get('seed', 0)})")


def _improved_text(spec: dict) -> str:
    return f"{spec['base']} plus {spec['edges']} edges chosen by {spec['criterion']} (seed {spec.get('seed', 0)})"


def settings(params: dict) -> dict[str, Any]:
    """The settings a reader needs to interpret the numbers, as params.yaml states them: a heading per kind
    of setting, one line per model, strategy, partition, graph and grid."""
    pretrain, evaluate = params["pretrain"], params["evaluate"]
    frameworks = {"fl": "FL", "decl": "DecL", "central": "central", "local": "stand-alone (local)"}
    training = [f"pretraining dataset `{pretrain['dataset']}` at {pretrain['image_size']} px"]
    training += [f"{label}: {_schedule((pretrain.get(fw) or {}).get('train') or {})}"
                 for fw, label in frameworks.items() if (pretrain.get(fw) or {}).get("train")]
    if (pretrain.get("local") or {}).get("clients"):
        training.append("stand-alone clients: " + "; ".join(
            f"{p}: {', '.join(map(str, c))}" for p, c in pretrain["local"]["clients"].items()))
    evaluation = [f"downstream datasets: {', '.join(evaluate['datasets'])}"]
    evaluation += [f"{fw}: {', '.join(protocols)}" for fw, protocols in evaluate["protocols"].items()]
    evaluation += [f"grid {name} (its table) read on: " + "; ".join(f"{key} {', '.join(entry[key])}"
                                                                   for key in ("datasets", "protocols") if key in entry)
                   for name, entry in (evaluate.get("grids") or {}).items()]
    evaluation.append("BatchNorm statistics of pretrained encoders re-estimated on the downstream training images: "
                      + ("yes" if evaluate.get("reestimate_batchnorm") else "no, as paper A and its code")
                      + " (evaluate.reestimate_batchnorm)")
    grids = [line for fw, place in (("fl", "partitions"), ("decl", "graphs"), ("local", "partitions"))
             for line in _grid_lines(fw, (pretrain.get(fw) or {}).get("grids"), place)]
    for section in ("weight_distance", "features"):
        grids += _grid_lines(section, (params.get(section) or {}).get("grids"), "partitions")
    own_seeds = any("seeds" in (grid or {}) for fw in ("fl", "decl", "local")
                    for grid in ((pretrain.get(fw) or {}).get("grids") or {}).values())
    return {
        "Seeds": ", ".join(str(s) for s in params["seeds"]) + (" (grids that set their own name them below)"
                                                                if own_seeds else ""),
        "Training": training,
        "Evaluation protocols per framework": evaluation,
        "Models": [f"`{name}`: {spec['method']} on {spec['backbone']}"
                   + (f" ({', '.join(f'{k}={v}' for k, v in spec['hparams'].items())})" if spec.get("hparams") else "")
                   for name, spec in params["models"].items()],
        "Strategies": [f"`{name}`: {_entry_text(spec)}" for name, spec in params["strategies"].items()],
        "Partitions": [f"`{name}`: {_partition_text(spec)}" for name, spec in params["partitions"].items()],
        "Graphs": [f"`{name}`: {_graph_text(spec)}" for name, spec in (params.get("graphs") or {}).items()]
                  + [f"`{name}`: {_improved_text(spec)}"
                     for name, spec in (params.get("improved_graphs") or {}).items()],
        "Grids (cells = models x partitions or graphs x strategies)": grids,
    }


def data_figures(params: dict) -> dict[str, dict[str, tuple[str, str]]]:
    """The partitions' heatmaps and the graphs' drawings (drawn by their stages): kind -> name -> (path
    relative to reports/, caption)."""
    def relative(path: Path) -> str:
        return path.relative_to(REPORTS).as_posix()

    figures = {"partitions": {name: (relative(partition_figure(name)), _partition_text(spec))
                              for name, spec in params["partitions"].items()},
               "graphs": {name: (relative(graph_figure(name)), _graph_text(spec))
                          for name, spec in (params.get("graphs") or {}).items()}}
    figures["graphs"].update({name: (relative(graph_figure(name)), _improved_text(spec))
                              for name, spec in (params.get("improved_graphs") or {}).items()})
    return {kind: entries for kind, entries in figures.items() if entries}


def run_summary(root: Path, params: dict, profile: str) -> dict[str, Any]:
    """What ran, from the tracking store: the stages of this DAG that logged a run, the summed time inside
    them and the time from the first one's start to the last one's end (``run_span``). Without runs of the
    profile in the store only the pretraining data is known."""
    from dssl.pipeline.catalogue import instances
    from dssl.tracking import stage_runs

    pretraining = f"{params['pretrain']['dataset']} at {params['pretrain']['image_size']} px"
    runs = stage_runs(root, profile)
    names = {stage.name for stage in instances(params)} - {"report"}
    if runs.empty or "metrics.stage_seconds" not in runs:
        return {"pretraining": pretraining}
    runs = runs[runs["stage"].isin(names)]
    if runs.empty:
        return {"pretraining": pretraining}
    return {"pretraining": pretraining, **run_span(runs)}


def run_span(runs) -> dict[str, Any]:
    """``stages``, ``stage_seconds`` (summed over each stage's latest run) and ``wall_seconds``: from the first
    of those stages' start to the last one's end. A stage logs its runs as it ends (``start_time``, ms), so it
    started ``stage_seconds`` before; the report's own time, any wait before it and the code stage's re-runs
    do not count. The span is left out (None) when the runs are not one session (over twice the summed stage
    time plus 5 minutes: a stage re-run days later would make it meaningless)."""
    latest = runs.sort_values("start_time").groupby("stage").tail(1)
    inside = float(latest["metrics.stage_seconds"].sum())
    # the code stage re-runs at every edit of the sources, rewriting identical manifests when what a stage runs
    # did not change (nothing after it re-runs then): its latest run dates the sources, not the run
    others = latest[latest["stage"] != "code"]
    timed = latest if others.empty else others
    ends = timed["start_time"].astype(float) / 1000.0
    wall = float(ends.max() - (ends - timed["metrics.stage_seconds"].astype(float)).min())
    return {"stages": len(latest), "stage_seconds": inside, "wall_seconds": wall if wall <= 2 * inside + 300 else None}


def run(params_path: Path | str) -> Path:
    stage = Stage("report", "", params_path)
    params = stage.params
    from dssl.pipeline.catalogue import result_folders
    from dssl.pipeline.verdicts import load_records
    from dssl.reporting.readme import write_report
    from dssl.reporting.results import stray_results
    from dssl.reporting.sections import FIGURES, FOLDER, check_sections_or_raise

    check_sections_or_raise(params, str(params_path))
    folders = result_folders(params)
    stray = stray_results(sorted(METRICS.rglob("*.json")), folders)
    if stray:   # DVC keeps a removed stage's outputs: they are no number of this run
        print(f"report: {len(stray)} result files under {METRICS}/ come from cells {params_path} no longer holds "
              f"and are not read (e.g. {stray[0]}); delete them to tidy up", file=sys.stderr)
    theory = THEORY_SUMMARY.read_text() if THEORY_SUMMARY.exists() else None
    report = params.get("report") or {}
    sections = report.get("sections") or {}
    context = {
        "profile": stage.profile,
        "dataset": report.get("dataset", params["evaluate"]["datasets"][0]),
        "settings": settings(params),
        "theory": theory,
        "weight_distances": DISTANCES,   # every weight_distance output (Table 5)
        "features": FEATURES,            # every features output (Fig. 3)
        "data_figures": data_figures(params),
        "run": run_summary(stage.root, params, stage.profile),
        "verdict_records": load_records(stage.root, Path(params_path), report.get("verdicts_elsewhere") or {}),
        "assets": [REPORTS],             # the partitions' and graphs' drawings, the theory figures
        "graphs": GRAPHS,                # every graph's statistics (Table 6: the mixing rules' distances)
        "models": params["models"], "strategies": params["strategies"],   # what each row ran
        "result_folders": folders,
    }
    # Build everything in a scratch folder first: a failure leaves the previous report intact.
    build = REPORTS / ".report-build"
    with atomic_dir(build) as tmp:
        written = [Path(p).relative_to(tmp) for p in write_report(METRICS, tmp, sections, context).values()]
    for folder in (FOLDER, FIGURES):   # no stale section or figure file survives
        shutil.rmtree(REPORTS / folder, ignore_errors=True)
        (REPORTS / folder).parent.mkdir(parents=True, exist_ok=True)
        os.replace(build / folder, REPORTS / folder)
    for page in ("README.md", "README.html"):
        os.replace(build / page, REPORTS / page)
    shutil.rmtree(build, ignore_errors=True)
    artifacts = [REPORTS / name for name in written]
    stage.log({"report": report, "profile": stage.profile}, {}, artifacts=artifacts, inputs=[METRICS])
    return REPORTS / "README.md"

"""End to end on the CI profile (the whole DAG at tiny sizes, 2 seeds): `dssl repro` (DVC's reproduce,
2 stages at once) runs every stage offline, logs one MLflow run per seed, writes the report from the
measured results, leaves DVC nothing to re-run, re-runs only what a params change touches, and after a
code edit exactly the stages whose import closure holds the edited module; Snakemake, with client workers, produces
byte-identical data outputs and the same metrics, which `dvc commit -f` accepts. Both runs are the session's shared
ones (``ci_runs``); the edits happen on a copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ci_runs import copy_run, warm_env, warm_stage_server

from dssl.config.grids import cell_seeds, reference_seeds
from dssl.pipeline.catalogue import instances
from dssl.pipeline.codedeps import import_closure
from dssl.pipeline.dag import dvc_stages
from dssl.tracking import stage_runs

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def run(cmd: list[str], cwd: Path, **extra_env: str) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **extra_env}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def dvc_status(cwd: Path) -> set[str]:
    """Changed stages by name (DVC prefixes a stage of a kind file with the file:
    ``pipelines/<kind>/<model>/dvc.yaml:``)."""
    out = run(["dvc", "status", "--json"], cwd)
    return {name.rpartition(":")[2] for name in yaml.safe_load(out.strip().splitlines()[-1]) or {}}


def descendants(dag, start: str) -> set[str]:
    """``start`` and every stage that (transitively) consumes its outputs."""
    found, frontier = {start}, [start]
    by_name = {stage.name: stage for stage in dag}
    while frontier:
        outs = by_name[frontier.pop()].outs
        for stage in dag:
            if stage.name not in found and any(d == o or d.startswith(o + "/") for d in stage.deps for o in outs):
                found.add(stage.name)
                frontier.append(stage.name)
    return found


def foundation_outputs(root: Path, params: dict) -> list[Path]:
    outs = [root / "data/prepared" / d / "train.npz" for d in params["datasets"]]
    for name in params["partitions"]:
        outs += [root / f"data/partitions/{name}/partition.json", root / f"data/partitions/{name}/counts.csv",
                 root / f"reports/figures/partitions/{name}.png"]
    for name in params["graphs"]:
        outs += [root / f"data/graphs/{name}/graph.json", root / f"reports/figures/graphs/{name}.png"]
    return outs


def expected_seeds(params: dict, result: dict) -> list[int]:
    """The seeds a result's cell runs: its grid's own, or the top-level list; a random-init reference runs
    every seed of its backbone's cells."""
    framework, model = result["framework"], result["model"]
    if framework == "random":
        return reference_seeds(params, result["backbone"])
    cell = {"fl": (model, result["partition"], result.get("strategy")), "local": (model, result["partition"]),
            "decl": (model, result["graph"], result.get("strategy"))}.get(framework)
    return cell_seeds(params, framework, cell) if cell else params["seeds"]


def check_results_and_table(root: Path, params: dict) -> None:
    """One result file per (cell, seed, protocol), over the cell's seeds; Table 1 holds their means."""
    import pandas as pd

    results = [json.loads(p.read_text()) for p in sorted((root / "reports/metrics").rglob("*.json"))]
    key = ("framework", "model", "backbone", "partition", "graph", "strategy", "protocol")
    cells = {tuple(r.get(k) for k in key): r for r in results}
    for cell, first in cells.items():
        seeds = sorted(r["seed"] for r in results if tuple(r.get(k) for k in key) == cell)
        assert seeds == expected_seeds(params, first), cell
    assert expected_seeds(params, {"framework": "random", "model": None, "backbone": "cnn_small"}) == [0, 1, 2]
    table = pd.read_csv(root / "reports/sections/table1.csv").set_index(["row", "setting"])
    protocol = params["report"]["sections"]["table1"]["protocol"]
    settings = {"fl-iid": "IID", "fl-label": "L/non-IID", "fl-feature": "F/non-IID"}
    fl = [r for r in results if r["framework"] == "fl" and r["protocol"] == protocol and r["partition"] in settings]
    readme = (root / "reports/README.md").read_text()
    assert fl
    for model in {r["model"] for r in fl}:
        for partition in {r["partition"] for r in fl}:
            runs = [r for r in fl if r["model"] == model and r["partition"] == partition]
            mean = sum(100 * r["test_acc"] for r in runs) / len(runs)
            label = f"{'MAE' if runs[0]['method'].startswith('mae') else 'SimSiam'} + {runs[0]['family'].upper()}"
            cell = table.loc[(label.replace("VIT", "ViT"), settings[partition])]
            assert abs(cell["mean"] - mean) < 1e-3, (model, partition, cell["mean"], mean)
            assert f"{cell['mean']:.2f}" in readme
    claims = pd.read_csv(root / "reports/sections/claims.csv")
    assert len(claims) and set(claims["verdict"]) <= {"supported", "contradicted", "inconclusive", "untestable"}
    # parameter counts travel from the pretraining into every pretrained cell's results (Table 2's sizes)
    assert all(r["method_parameters"] > r["encoder_parameters"] > 0 for r in results if r["framework"] == "fl")
    # so do the rounds an FL or DecL cell trained (the learning curve's x), from the model's history
    for framework in ("fl", "decl"):
        trained = {(r["model"], r["strategy"]): r["rounds"] for r in results if r["framework"] == framework}
        assert trained and all(rounds == train_rounds(params, framework, strategy)
                               for (_, strategy), rounds in trained.items()), trained
    assert all(r.get("rounds") is None for r in results if r["framework"] in ("central", "local", "random"))
    # Table 5: the weight_distance stages' distances, one row per (pair of models, column)
    distances = pd.read_csv(root / "reports/sections/table5.csv")
    assert set(distances["row"]) == {"local 1 vs local 4", "local 1 vs global", "local 4 vs global"}
    # paired on the seeds the FL cell and the stand-alone cell (which runs one more) both train
    assert (distances["mean"] > 0).all() and set(distances["n"]) == {len(params["seeds"])}
    # stand-alone clients (pretrain_local, evaluate_local): one result per seed of its grid, the mean over its clients
    local = [r for r in results if r["framework"] == "local"]
    assert len(local) == len(params["pretrain"]["local"]["grids"]["table5"]["seeds"])
    assert all(sorted(r["clients"]) == ["0", "3"] for r in local)
    assert all(abs(r["test_acc"] - sum(r["clients"].values()) / 2) < 1e-9 for r in local)


def check_report_pages(root: Path, params: dict) -> None:
    """The report opens with what ran and the claims figure; Fig. 3 comes from the features stages; the
    HTML page holds every figure inline and, where Chromium is installed, loads with every image decoded."""
    import re

    import pandas as pd
    from browser import broken_links, chromium, page_facts

    report = (root / "reports/README.md").read_text()
    head = report[:report.index("\n## ", report.index("## Summary") + 1)]
    assert "**What ran:** profile **ci**" in head and " stages, " in head and "](figures/report/claims.png)" in head
    figures = {p.name for p in (root / "reports/figures/report").glob("*.png")}
    assert {"claims.png", "pretraining_gain.png", "table1.png", "fig2a.png", "fig3.png"} <= figures
    features = root / "reports/features/simsiam-cnn/fl-label/fedavg"
    embedding, record = pd.read_csv(features / "embedding.csv"), json.loads((features / "features.json").read_text())
    clients = params["features"]["clients"]
    assert set(embedding["model"]) == {*(f"local {c + 1}" for c in clients), "global"}
    assert embedding.groupby("model").size().tolist() == [record["images"]] * (len(clients) + 1)
    assert abs(record["images"] - params["features"]["images"]) <= 10   # a class-stratified subset
    page = root / "reports/README.html"
    sources = re.findall(r'<img src="([^"]*)"', page.read_text())
    assert len(sources) >= len(figures) and all(src.startswith("data:image/png;base64,") for src in sources)
    if chromium() is not None:
        facts = page_facts(page)
        assert all(image["decoded"] and image["width"] > 0 for image in facts["images"])
        assert broken_links(page, facts) == []


def test_dvc_repro_runs_every_stage_then_only_what_changed(ci_dvc_run: Path, tmp_path: Path) -> None:
    dvc_root = copy_run(ci_dvc_run, tmp_path / "dvc")
    params = yaml.safe_load((dvc_root / "params.yaml").read_text())
    original_params = (dvc_root / "params.yaml").read_text()

    # 1. every stage ran (`dssl repro` through the warm stage server, as `make repro` does) and wrote its outputs
    outputs = foundation_outputs(dvc_root, params)
    assert all(p.is_file() for p in outputs), [str(p) for p in outputs if not p.is_file()]
    dag, _ = dvc_stages(dvc_root)
    missing = [o for stage in dag for o in stage.outs if not (dvc_root / o).exists()]
    assert missing == []
    report = (dvc_root / "reports/README.md").read_text()
    assert "Per claim, from which d on it holds" in report
    check_results_and_table(dvc_root, params)
    check_report_pages(dvc_root, params)

    # 2. DVC itself finds every stage recorded: its own repro does nothing
    again = run(["dvc", "repro"], dvc_root)
    assert "Running stage" not in again
    assert dvc_status(dvc_root) == set()

    # 3. every stage was logged to MLflow with its lineage, a training stage once per seed
    runs = stage_runs(dvc_root, "ci")
    assert set(runs["tags.stage"]) == {stage.name for stage in dag}
    pretrain = runs[runs["tags.stage"] == "pretrain_fl@simsiam-cnn-fl-iid-fedavg"]
    assert sorted(pretrain["tags.seed"]) == [str(s) for s in params["seeds"]]
    assert (pretrain["metrics.peak_rss_mb"] > 0).all()
    assert set(runs["tags.engine"]) == {"dvc"}
    graph_run = runs[runs["run_name"] == "graphs/uniform-3"].iloc[0]
    assert graph_run["metrics.connectivity_mean"] == 3.0
    assert graph_run["tags.dvc_stage"] == "graphs"

    # 4. a changed partition param re-runs that partition and (some of) what depends on it, nothing else
    edited = yaml.safe_load((dvc_root / "params.yaml").read_text())
    edited["partitions"]["decl-label"]["alpha"] = 0.5
    (dvc_root / "params.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    # DVC reports the first changed stage, and the report, which prints the partitions' settings
    assert dvc_status(dvc_root) == {"partitions", "report"}
    before = (dvc_root / "data/partitions/decl-label/partition.json").read_bytes()
    # through the warm stage server, as `make repro` runs (a cold stage would import torch and MLflow first)
    with warm_stage_server(dvc_root, warm_env()):
        rerun = run(["dssl", "repro", "--jobs", "2"], dvc_root)
        # a stage of a kind file runs as 'pipelines/<kind>/<model>/dvc.yaml:<stage>'
        ran = {line.split("'")[1].rpartition(":")[2] for line in rerun.splitlines()
               if line.startswith("Running stage")}
        assert "partitions" in ran and "pretrain_decl@mae-vit-uniform-3-decl-uniform" in ran
        assert ran <= descendants(dag, "partitions")
        # the FL partitions were rebuilt with the same bytes: nothing downstream of them re-ran
        assert not any(name.startswith(("pretrain_fl", "evaluate_fl")) for name in ran)
        assert (dvc_root / "data/partitions/decl-label/partition.json").read_bytes() != before
        (dvc_root / "params.yaml").write_text(original_params)
        run(["dvc", "repro"], dvc_root)

    # 5. a stage depends on the code it runs: its kind's machinery and its own method, backbone, strategy and
    # protocols
    check_code_lineage(dvc_root, params)


def _edit_code(dvc_root: Path, module: str, text: str) -> set[str]:
    """Append ``text`` to a module, refresh the code manifests, and return the stages DVC finds changed; the
    module is restored after (the next refresh rewrites every manifest from the sources, so each edit is
    judged alone; ``check_code_lineage`` refreshes once more at the end)."""
    source = dvc_root / "src" / (module.replace(".", "/") + ".py")
    original = source.read_text()
    source.write_text(original + text)
    try:
        run(["dvc", "repro", "--single-item", "code"], dvc_root)
        return dvc_status(dvc_root)
    finally:
        source.write_text(original)


def check_code_lineage(dvc_root: Path, params: dict) -> None:
    """A comment re-runs nothing; a statement re-runs exactly the stages that run the module: for a shared
    module the stages whose kind imports it, for a registry entry the cells that use it (syntax-tree digests
    themselves: tests/pipeline/test_catalogue.py)."""
    stages = instances(params)
    source = dvc_root / "src/dssl/methods/simsiam.py"
    original = source.read_text()
    source.write_text(original + "\n# a comment\n")
    assert dvc_status(dvc_root) == {"code"}   # DVC sees the package change: the code stage re-runs alone
    source.write_text(original)
    assert _edit_code(dvc_root, "dssl.methods.simsiam", "\n# a comment\n") == set()
    mixing = {s.name for s in stages
              if s.kind.name != "code" and "dssl.topology.mixing" in import_closure(s.kind.module)}
    assert mixing and _edit_code(dvc_root, "dssl.topology.mixing", "\n_EDITED = 1\n") == mixing
    # SimSiam's pretraining cells only; every stage that builds a ViT (evaluations included)
    for module, component in (("dssl.methods.simsiam", "method/simsiam"), ("dssl.models.vit", "backbone/vit_small")):
        users = {s.name for s in stages if component in s.components}
        assert users and _edit_code(dvc_root, module, "\n_EDITED = 1\n") == users, module
    # an evaluation protocol: the evaluation stages that run it (``protocol/<names>``), not every evaluation
    finetune = {s.name for s in stages
                if s.kind.name.startswith("evaluate_") and "finetune" in s.fields["protocols"].split("+")}
    evaluations = {s.name for s in stages if s.kind.name.startswith("evaluate_")}
    assert finetune and finetune < evaluations
    assert _edit_code(dvc_root, "dssl.evaluation.finetune", "\n_EDITED = 1\n") == finetune
    # a strategy no cell of this profile uses, and a new method module: no existing stage re-runs
    assert _edit_code(dvc_root, "dssl.federation.strategies.fedema", "\n_EDITED = 1\n") == set()
    run(["dvc", "repro", "--single-item", "code"], dvc_root)
    assert dvc_status(dvc_root) == set()
    new_method = dvc_root / "src/dssl/methods/added_method.py"   # a method is its module and its spec's
    new_spec = dvc_root / "src/dssl/config/methods/added_method.py"
    new_method.write_text("from dssl.methods.simsiam import SimSiam\n\n\nclass Added(SimSiam):\n    pass\n")
    new_spec.write_text("from dssl.config.methods import MethodSpec\n"
                        "from dssl.config.methods.simsiam import SimSiamConfig\n\n"
                        "SPEC = MethodSpec('added_method', SimSiamConfig, 'methods.added_method:Added')\n")
    try:
        run(["dvc", "repro", "--single-item", "code"], dvc_root)
        assert dvc_status(dvc_root) == set()
    finally:
        new_method.unlink()
        new_spec.unlink()
        run(["dvc", "repro", "--single-item", "code"], dvc_root)
    assert dvc_status(dvc_root) == set()


def test_snakemake_gives_the_bits_of_dvc_repro(ci_dvc_run: Path, ci_local_run) -> None:
    # Snakemake in parallel (2 jobs), each FL / DecL round's clients trained at once in 2 worker processes,
    # logging to a tracking server: the same data bytes and the same metrics; DVC then accepts them
    snake_root = ci_local_run.root
    params = yaml.safe_load((ci_dvc_run / "params.yaml").read_text())
    outputs = foundation_outputs(ci_dvc_run, params)
    for dvc_file, snake_file in zip(outputs, foundation_outputs(snake_root, params)):
        if dvc_file.suffix != ".png":  # figures embed nothing random, but fonts may hint differently
            assert dvc_file.read_bytes() == snake_file.read_bytes(), dvc_file
    results = sorted((ci_dvc_run / "reports/metrics").rglob("*.json"))
    assert results
    for result in results:
        twin = snake_root / result.relative_to(ci_dvc_run)
        assert json.loads(twin.read_text())["test_acc"] == json.loads(result.read_text())["test_acc"], result
    assert ci_local_run.dvc_status_after_commit == "{}"
    assert {r["engine"] for r in ci_local_run.runs} == {"snakemake"}


def test_a_bad_params_file_fails_before_any_output(make_project) -> None:
    root = make_project("configs/ci.yaml")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["partitions"]["fl-label"]["alpha"] = -1
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["dvc", "repro"], cwd=root, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "partitions.fl-label.alpha: must be > 0, got -1" in result.stdout + result.stderr
    assert not (root / "data/prepared").exists()


def train_rounds(params: dict, framework: str, strategy: str) -> int:
    """The rounds a cell trains: the strategy entry's ``train.rounds``, else its framework's."""
    override = (params["strategies"][strategy].get("train") or {}).get("rounds")
    return override or params["pretrain"][framework]["train"]["rounds"]

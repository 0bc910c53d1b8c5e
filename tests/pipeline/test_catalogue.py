"""The stage catalogue: dvc.yaml is generated from it and current, code dependencies are the import
closure of each entry module, and the stage count does not grow with the number of seeds."""

from __future__ import annotations

import modulefinder
from pathlib import Path

import pytest

from dssl.config.params import load_params, read_params
from dssl.config.protocols import PROTOCOL_SPECS
from dssl.pipeline.catalogue import (KINDS, Catalogue, component_modules, component_terms, instances, manifest_path,
                                     producer)
from dssl.pipeline.code import code_manifest
from dssl.pipeline.codedeps import closure_files, code_dependencies, compact, import_closure, package_root
from dssl.pipeline.dvcfile import dangling_stages, git_tracked_outputs, is_stale, render_files, rendered_stages
from dssl.yamlio import load_yaml

REPO = Path(__file__).resolve().parents[2]


def test_checked_in_dvc_yaml_is_generated_from_the_catalogue() -> None:
    assert not is_stale(load_params(REPO / "params.yaml"), REPO), "dvc.yaml is stale: run `dssl dag write`"


def test_a_stale_dvc_yaml_is_detected(make_project) -> None:
    root = make_project("configs/ci.yaml")
    params = read_params(root / "params.yaml")
    assert not is_stale(params, root)
    params["pretrain"]["fl"]["grids"]["table1"]["models"] = ["simsiam-cnn"]  # a grid change without `dssl dag write`
    assert is_stale(params, root)


def test_kinds_with_arguments_have_a_lock_file_per_model_and_all_are_upstream_of_the_report(make_project) -> None:
    """One dvc.yaml per kind and first argument keeps each dvc.lock small (DVC rewrites a stage's whole lock
    file after every stage); their stages run from the project root and every one is upstream of the report."""
    root = make_project("configs/ci.yaml")
    params = read_params(root / "params.yaml")
    files = render_files(params, root)
    assert ("pipelines/pretrain_fl/simsiam-cnn/dvc.yaml" in files
            and "pipelines/evaluate_local/simsiam-cnn/dvc.yaml" in files)
    assert "pipelines/prepare/digits/dvc.yaml" in files and "pipelines/evaluate_random/cnn_small/dvc.yaml" in files
    in_file = load_yaml(files["pipelines/pretrain_fl/simsiam-cnn/dvc.yaml"])
    assert in_file["stages"]["pretrain_fl"]["foreach"] and all(
        row["model"] == "simsiam-cnn" for row in in_file["stages"]["pretrain_fl"]["foreach"].values())
    assert rendered_stages(params, root)["pretrain_fl"]["do"]["wdir"] == "../../.."
    assert "wdir" not in rendered_stages(params, root)["report"]
    assert dangling_stages(params, root) == []
    params["evaluate"]["protocols"]["central"] = []   # central models nothing evaluates any more
    assert dangling_stages(params, root) == ["pretrain_central@simsiam-cnn"]
    (root / "pipelines/obsolete").mkdir()
    (root / "pipelines/obsolete/dvc.yaml").write_text("stages: {}\n")   # a kind no params file renders
    assert is_stale(read_params(root / "params.yaml"), root)


def test_git_tracked_files_inside_outputs_are_found_before_any_stage_runs(make_project, monkeypatch, capsys) -> None:
    """An output folder that moved (Table 5's local models) can hold a .gitignore git still tracks: DVC would
    refuse the output only after training; ``dssl dag write`` names the files and the fix first."""
    import subprocess

    from dssl.cli import main

    root = make_project("configs/ci.yaml")
    params = read_params(root / "params.yaml")
    assert git_tracked_outputs(params, root) == []
    stale = root / "models/local/simsiam-cnn/fl-label/.gitignore"
    stale.parent.mkdir(parents=True)
    stale.write_text("/fedavg\n")
    subprocess.run(["git", "add", "-f", str(stale)], cwd=root, check=True)
    assert git_tracked_outputs(params, root) == ["models/local/simsiam-cnn/fl-label/.gitignore"]
    monkeypatch.chdir(root)
    assert main(["dag", "write", "--params", "params.yaml"]) == 1
    assert "git rm --cached models/local/simsiam-cnn/fl-label/.gitignore" in capsys.readouterr().err


def _modulefinder_imports(entry: str) -> set[str]:
    """dssl modules an independent static analysis (the bytecode scanner of the standard library) finds."""
    finder = modulefinder.ModuleFinder(path=[str(package_root())])
    finder.import_hook(entry)
    return {name for name in finder.modules if name == "dssl" or name.startswith("dssl.")}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_module_the_entry_imports_is_a_dependency(kind) -> None:
    found = _modulefinder_imports(kind.module)
    assert kind.module in found
    assert found <= import_closure(kind.module), sorted(found - import_closure(kind.module))


def test_lazy_imports_inside_functions_count() -> None:
    # pretrain.py imports the federation simulators and the partition loader inside functions only
    closure = import_closure("dssl.pipeline.pretrain")
    assert {"dssl.federation.simulator", "dssl.data.partition", "dssl.topology.mixing", "dssl.data.augment"} <= closure
    assert "dssl.reporting.tables" not in closure
    assert "dssl.pipeline.catalogue" not in closure  # dispatch is not part of any stage's computation


def test_a_module_named_by_a_string_counts(tmp_path) -> None:
    # importlib.import_module("dssl.b") is an import too: the closure holds dssl.b and what it imports
    package = tmp_path / "dssl"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("import importlib\n\ndef load():\n    return importlib.import_module('dssl.b')\n")
    (package / "b.py").write_text("from dssl import c\n")
    (package / "c.py").write_text("")
    assert import_closure("dssl.a", tmp_path) == {"dssl", "dssl.a", "dssl.b", "dssl.c"}


def test_only_the_evaluation_stages_that_run_a_protocol_depend_on_its_implementation() -> None:
    # every stage reads the protocol registry (the params validator does); no kind's shared code holds an
    # implementation: an evaluation depends on those of the protocols its cell runs (``protocol/<names>``), so
    # an edit to fine-tuning re-runs the fine-tuning evaluations and the report, nothing else
    implementations = {protocol.module for protocol in PROTOCOL_SPECS.values()}
    assert implementations == {"dssl.evaluation.linear_probe", "dssl.evaluation.finetune", "dssl.evaluation.knn",
                               "dssl.evaluation.few_shot"}
    stages = instances(read_params(REPO / "params.yaml"))
    for stage in stages:
        assert implementations & import_closure(stage.kind.module) == set(), stage.kind.name
    evaluations = {s.name for s in stages if s.kind.name.startswith("evaluate_")}
    for module in implementations:
        protocols = {name for name, spec in PROTOCOL_SPECS.items() if spec.module == module}
        depends = {s.name for s in stages if any(module in component_modules(c) for c in s.components)}
        runs = {s.name for s in stages if s.name in evaluations and protocols & set(s.fields["protocols"].split("+"))}
        assert depends == runs, module
    # the embedded default scores MAE + ViT on kNN alone and the stand-alone clients on the probe alone
    knn, probe = (PROTOCOL_SPECS[name].module for name in ("knn", "linear_probe_10pct"))
    partial = [{s.name for s in stages if any(m in component_modules(c) for c in s.components)} for m in (knn, probe)]
    assert all(set() < names < evaluations for names in partial)
    assert "dssl.federation.simulator" not in import_closure("dssl.pipeline.evaluate")


def test_a_component_of_several_entries_hashes_the_union_of_their_closures() -> None:
    assert component_terms("protocol/knn+linear_probe_10pct") == [("protocol", "knn"),
                                                                  ("protocol", "linear_probe_10pct")]
    assert component_terms("strategy/fedmar+alignment/cosine") == [("strategy", "fedmar"), ("alignment", "cosine")]
    # an entry's code is its spec module and its implementation (fedmar and decmar share mar.py)
    assert component_modules("strategy/fedmar+alignment/cosine") == ["dssl.config.strategies.fedmar",
                                                                     "dssl.federation.strategies.mar",
                                                                     "dssl.config.alignments.cosine",
                                                                     "dssl.federation.alignments.cosine"]
    files = set(closure_files(component_modules("protocol/knn+linear_probe_10pct")))
    assert files == {*closure_files("dssl.config.protocols.knn"), *closure_files("dssl.evaluation.knn"),
                     *closure_files("dssl.config.protocols.linear_probe_10pct"),
                     *closure_files("dssl.evaluation.few_shot")}
    with pytest.raises(ValueError, match="registry"):
        component_terms("colour/red")


def test_no_stage_computes_with_the_catalogue() -> None:
    # the catalogue is dispatch (which stages exist, what they read): an edit to it must re-run no stage
    # but those that print it (the report) or write the manifests (code); a stage's missing input is an
    # ArtifactError to which `dssl <stage>` adds the command that writes it
    readers = {kind.name for kind in KINDS if "dssl.pipeline.catalogue" in import_closure(kind.module)}
    assert readers == {"code", "report"}


def test_no_stage_kind_imports_a_registry_entry_module() -> None:
    # methods, backbones and strategies load lazily by name: a kind's shared code holds none of them, so an
    # edit of one re-runs only the cells that use it (their manifests, ``<registry>/<name>.json``)
    from dssl.registry import SPEC_PACKAGES, SpecRegistry

    entries = {module for kind in SPEC_PACKAGES for name in SpecRegistry.of(kind).names()
               for module in SpecRegistry.of(kind).modules_of(name)}   # each entry's spec and implementation
    assert {"dssl.methods.byol", "dssl.models.vit", "dssl.federation.strategies.fedema", "dssl.evaluation.finetune",
            "dssl.topology.mixing_rules.push_sum", "dssl.federation.alignments.cosine",
            "dssl.config.backbones.vit_small", "dssl.config.protocols.knn", "dssl.config.mixing.push_sum",
            "dssl.config.alignments.cosine"} <= entries
    for kind in KINDS:
        assert entries & import_closure(kind.module) == set(), kind.name


def test_each_cell_depends_on_the_manifests_of_its_method_backbone_and_strategy() -> None:
    params = load_params(REPO / "params.yaml")
    stages = {s.name: s for s in instances(params)}
    fedema = stages["pretrain_fl@byol-cnn-fl-2class-fedema"]
    assert fedema.components == ("method/byol", "backbone/cnn_small", "strategy/fedema")
    assert stages["pretrain_central@mae-vit"].components == ("method/mae", "backbone/vit_small", "strategy/fedavg")
    assert stages["evaluate_random@vit_small"].components == (
        "backbone/vit_small", "protocol/knn+linear_probe_10pct")
    users = {name for name, s in stages.items() if "strategy/fedema" in s.components}
    assert users and all(name.startswith(("pretrain_fl@", "pretrain_decl@")) for name in users)
    dvc = rendered_stages(params, REPO)
    deps = dvc["pretrain_fl"]["do"]["deps"]
    assert {"reports/lineage/code/pretrain_fl.json", "reports/lineage/code/method/${item.method}.json",
            "reports/lineage/code/strategy/${item.strategy_code}.json"} <= set(deps)
    assert "reports/lineage/code/mixing/${item.mixing}.json" in dvc["pretrain_decl"]["do"]["deps"]
    assert "reports/lineage/code/protocol/${item.protocols}.json" in dvc["evaluate_fl"]["do"]["deps"]
    assert set(dvc["code"]["outs"]) >= {manifest_path(c) for s in stages.values() for c in s.components}


def test_a_cell_depends_on_its_mixing_rule_alignment_and_protocols_alone() -> None:
    # a DecL cell on its mixing rule's manifest, a FedMAR / DecMAR cell on its alignment's (the default
    # included), an evaluation on its protocols'; the graph stages save every rule's matrix
    params = load_params(REPO / "params.yaml")
    stages = instances(params)
    decl = [s for s in stages if s.kind.name == "pretrain_decl"]
    assert decl and all(f"mixing/{s.fields['mixing']}" in s.components for s in decl)
    push_sum = {s.name for s in stages if "mixing/push_sum" in s.components}
    assert push_sum == {s.name for s in decl if s.fields["mixing"] == "push_sum"} | {"graphs"} | {
        s.name for s in stages if s.kind.name == "graph_improve"}
    mar = [s for s in stages if s.kind.name.startswith("pretrain_")
           and s.fields.get("strategy_code", "").startswith(("fedmar", "decmar"))]
    assert mar and all("+alignment/" in s.components[2] for s in mar)
    cosine = {s.name for s in stages if any("alignment/cosine" in c for c in s.components)}
    assert cosine == {s.name for s in mar if params["strategies"][s.fields["strategy"]].get("alignment") == "cosine"}
    assert all("+alignment/" not in c for s in stages if s.kind.name.startswith("pretrain_") and s not in mar
               for c in s.components)
    used = {c for s in stages for c in s.components}
    manifests = {name: code_manifest(component_modules(name), REPO) for name in used
                 if name.startswith(("mixing/", "protocol/", "strategy/fedmar+"))}
    assert any("src/dssl/topology/mixing_rules/push_sum.py" in m["files"] for m in manifests.values())
    for name, manifest in manifests.items():
        assert "src/dssl/topology/mixing_rules/uniform.py" not in manifest["files"] or name == "mixing/uniform"
        assert ("src/dssl/evaluation/finetune.py" in manifest["files"]) == ("finetune" in name), name
        assert ("src/dssl/federation/alignments/cosine.py" in manifest["files"]) == name.endswith("/cosine"), name


def test_a_code_digest_ignores_comments_docstrings_and_layout(tmp_path: Path) -> None:
    from dssl.pipeline.codedeps import code_digest

    def digest(text: str) -> str:
        path = tmp_path / "module.py"
        path.write_text(text)
        return code_digest(path)

    base = digest('"""Module."""\n\ndef f(x):\n    """Twice."""\n    return 2 * x\n')
    assert digest("def f(x):  # doubled\n    return 2*x\n") == base
    assert digest("def f(\n    x,\n):\n\n    return (2 *\n            x)\n") == base
    assert digest("def f(x):\n    return 3 * x\n") != base
    assert digest("def f(x):\n    y = 'a string, not a docstring'\n    return 2 * x\n") != base
    data = tmp_path / "numbers.yaml"
    data.write_text("a: 1  # a comment in package data counts\n")
    before = code_digest(data)
    data.write_text("a: 1\n")
    assert code_digest(data) != before


def test_compact_lists_a_folder_only_when_all_its_files_are_dependencies() -> None:
    root = package_root() / "dssl"
    files = closure_files("dssl.pipeline.report")
    listed = compact(files, root)
    for entry in listed:
        if entry.is_dir():
            inside = {p for p in entry.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
            assert inside <= set(files), entry
    assert (root / "reporting" / "paper_numbers.yaml") in files  # package data the report reads


def test_each_kind_depends_on_its_code_manifest_in_dvc_yaml() -> None:
    dvc = rendered_stages(load_params(REPO / "params.yaml"), REPO)
    assert dvc["code"]["deps"] == ["src/dssl"]
    for kind in KINDS[1:]:
        block = dvc[kind.name].get("do", dvc[kind.name])
        assert manifest_path(kind.name) in block["deps"], kind.name
        assert not [d for d in block["deps"] if d.startswith("src/")], kind.name  # one lock entry for code


def test_a_manifest_hashes_exactly_the_closure(tmp_path: Path) -> None:
    from dssl.pipeline.codedeps import code_digest

    manifest = code_manifest("dssl.pipeline.partition", REPO)
    files = closure_files("dssl.pipeline.partition")
    expected = {p.relative_to(REPO).as_posix() for p in files}
    assert set(manifest["files"]) == expected
    assert all(manifest["files"][p.relative_to(REPO).as_posix()] == code_digest(p) for p in files)
    assert set(code_dependencies("dssl.pipeline.partition", REPO)) <= expected | {
        str(Path(f).parent.as_posix()) for f in expected} | {"src/dssl/config", "src/dssl/tracking"}


def test_seeds_do_not_multiply_stages() -> None:
    params = load_params(REPO / "params.yaml")
    one = len(instances({**params, "seeds": [0]}))
    assert len(instances({**params, "seeds": list(range(10))})) == one


def test_producer_names_the_stage_of_an_output() -> None:
    params = load_params(REPO / "params.yaml")
    assert producer(params, "data/prepared/digits/train.npz").name == "prepare@digits"
    assert (producer(params, "models/fl/mae-vit/fl-label/fedavg/seed-1/encoder.pt").name
            == "pretrain_fl@mae-vit-fl-label-fedavg")
    assert producer(params, "data/graphs/uniform-3/graph.json").name == "graphs"
    assert producer(params, "data/graphs/general-3-plus5/graph.json").name == "graph_improve@general-3-plus5"
    assert producer(params, "nowhere/file") is None


def test_rendered_dvc_yaml_declares_one_block_per_kind() -> None:
    params = load_params(REPO / "configs/ci.yaml")
    files = render_files(params, REPO)
    assert all(text.startswith("# Generated by `dssl dag write`") for text in files.values())
    text = "".join(files.values())
    catalogue = Catalogue(params, REPO)
    assert {s.kind.name for s in catalogue.stages} == {k.name for k in KINDS}
    assert "foreach:" in text and "${item.model}" in text


def test_a_params_file_runs_in_the_project_or_in_its_profiles_folder(tmp_path: Path) -> None:
    from dssl.pipeline.layout import pipeline_folder

    assert pipeline_folder("params.yaml", {"profile": "default"}, tmp_path) == Path(".")
    assert pipeline_folder(tmp_path / "params.yaml", {"profile": "ci"}, tmp_path) == Path(".")
    assert pipeline_folder("configs/paper.yaml", {"profile": "paper"}, tmp_path) == Path("runs/paper")
    assert pipeline_folder("configs/x.yaml", {}, tmp_path) == Path("runs/default")
    with pytest.raises(ValueError, match="cannot name its pipeline folder"):
        pipeline_folder("configs/x.yaml", {"profile": "../elsewhere"}, tmp_path)


def test_the_code_stage_removes_the_manifests_of_components_no_stage_runs(make_project, monkeypatch) -> None:
    """A params change that drops a protocol set leaves its manifest behind unless the code stage removes it;
    the verdict records' code digest covers the folder, so an incremental run's must equal a fresh run's."""
    from dssl.pipeline import code
    from dssl.pipeline.verdicts import code_digest

    root = make_project()
    monkeypatch.chdir(root)
    code.run(root / "params.yaml")
    fresh = code_digest(root)
    folder = root / "reports/lineage/code"
    stale = folder / "protocol/finetune+knn.json"
    stale.write_text((folder / "protocol/knn.json").read_text())
    assert code_digest(root) != fresh
    code.run(root / "params.yaml")
    assert not stale.exists() and (folder / "protocol/knn.json").is_file()
    assert code_digest(root) == fresh

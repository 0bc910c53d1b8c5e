"""dvc.yaml and the Snakefile declare the same stages: same names, commands, inputs and outputs."""

from __future__ import annotations

import pytest
import yaml

from dssl.pipeline.dag import dvc_stages, snakemake_stages



@pytest.mark.parametrize("params_file", ["params.yaml", "configs/ci.yaml"])
def test_dvc_and_snakemake_declare_the_same_stages(make_project, params_file: str) -> None:
    root = make_project(params_file)
    dvc, params_deps = dvc_stages(root)
    snake = snakemake_stages(root)
    assert [s.name for s in dvc] == [s.name for s in snake]
    assert dvc == snake
    params = yaml.safe_load((root / "params.yaml").read_text())
    expected_count = len(params["datasets"]) + 2  # + partitions, graphs
    assert len(dvc) >= expected_count


def test_each_stage_depends_only_on_its_own_params_entry(make_project) -> None:
    root = make_project()
    _, params_deps = dvc_stages(root)
    for stage, keys in params_deps.items():
        kind, _, entry = stage.partition("@")
        if kind in ("prepare", "graph_improve"):
            assert keys[0] == f"{'datasets' if kind == 'prepare' else 'improved_graphs'}.{entry}", stage
    # the light stages that build every partition / graph read exactly their section
    assert params_deps["partitions"] == ["partitions"] and params_deps["graphs"] == ["graphs"]
    # training stages read their model's entry and its backbone family's optimizer, never the whole models
    # section, another family's optimizer or another grid
    assert params_deps["pretrain_fl@mae-vit-fl-label-fedavg"] == sorted([
        "models.mae-vit", "pretrain.dataset", "pretrain.fl.train", "pretrain.image_size", "pretrain.optimizers.vit",
        "seeds", "strategies.fedavg"])
    assert "pretrain.optimizers.cnn" in params_deps["pretrain_central@simsiam-cnn"]
    # evaluation stages read their framework's protocols' configs (which ViT features, whether BatchNorm is
    # re-estimated), no other
    assert params_deps["evaluate_decl@mae-vit-uniform-3-decl-uniform"] == sorted([
        "evaluate.datasets", "evaluate.grids", "evaluate.knn", "evaluate.protocols.decl",
        "evaluate.reestimate_batchnorm", "evaluate.vit_pool", "pretrain.image_size", "seeds",
        "strategies.decl-uniform"])


def test_a_drift_is_detected(make_project) -> None:
    root = make_project()
    snakefile = root / "Snakefile"
    snakefile.write_text(snakefile.read_text().replace('"dssl {rule} {params.args} --params "',
                                                      '"dssl {rule} {params.args} --quiet --params "'))
    dvc, _ = dvc_stages(root)
    assert dvc != snakemake_stages(root)


def test_another_params_file_has_the_same_stages_in_its_pipeline_folder(make_project) -> None:
    """configs/ci.yaml beside the embedded params.yaml: both engines run it in runs/ci/, paths relative to
    that folder, the commands naming the file as seen from there; the embedded DAG is unchanged."""
    from dssl.config.params import read_params
    from dssl.pipeline.dvcfile import write_files

    root = make_project("params.yaml")
    embedded, _ = dvc_stages(root)
    written = write_files(read_params(root / "configs/ci.yaml"), root, "configs/ci.yaml")
    assert written and all(path.startswith("runs/ci/") for path in written)
    dvc, params_deps = dvc_stages(root, "configs/ci.yaml")
    assert dvc == snakemake_stages(root, "configs/ci.yaml")
    assert {s.cmd.split(" --params ")[1] for s in dvc} == {"../../configs/ci.yaml"}
    code = next(s for s in dvc if s.name == "code")
    assert code.deps and all(dep.startswith("../../src/dssl/") for dep in code.deps)
    assert params_deps["pretrain_fl@simsiam-cnn-fl-iid-fedavg"][0] == "models.simsiam-cnn"
    assert dvc_stages(root)[0] == embedded

"""dvc.yaml and the Snakefile declare the same stages: same names, commands, inputs and outputs."""

from __future__ import annotations

from pathlib import Path

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
    assert params_deps["evaluate_decl@mae-cnn-uniform-3-decl-uniform"] == sorted([
        "evaluate.datasets", "evaluate.finetune", "evaluate.protocols.decl", "pretrain.image_size", "seeds",
        "strategies.decl-uniform"])


def test_a_drift_is_detected(make_project) -> None:
    root = make_project()
    snakefile = root / "Snakefile"
    snakefile.write_text(snakefile.read_text().replace('"dssl {rule} {params.args} --params "',
                                                      '"dssl {rule} {params.args} --quiet --params "'))
    dvc, _ = dvc_stages(root)
    assert dvc != snakemake_stages(root)

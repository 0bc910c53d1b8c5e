"""``dssl plan``: images, FLOPs, bytes, GPU-hours and job runtimes of a tiny grid computed by hand; FLOPs of
small backbones counted by hand; the plan's checkpoint bytes against a real run's; the paper profiles."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from dssl.cli import main
from dssl.config.checker import ParamsError
from dssl.config.protocols import PROTOCOL_SPECS
from dssl.evaluation.splits import stratified_split
from dssl.methods import create_method
from dssl.models import create_backbone
from dssl.planning.costs import CostCache, count_flops, encoder_costs, model_costs, state_costs, tensor_bytes
from dssl.planning.plan import make_plan, parse_runtime, render
from dssl.planning.throughput import merge_results
from dssl.planning.workload import evaluation_counts, protocol_work

REPO = Path(__file__).resolve().parents[2]

# cnn_small at 8 px, 1 channel: 3x3 convolutions 1->32 (8x8 out), 32->64 (4x4), 64->128 (2x2); two FLOPs a MAC
CONV = [2 * 32 * 1 * 9 * 64, 2 * 64 * 32 * 9 * 16, 2 * 128 * 64 * 9 * 4]
CNN_FORWARD = sum(CONV)                                  # 1,216,512
CNN_TRAIN = CNN_FORWARD + CONV[0] + 2 * (CONV[1] + CONV[2])  # backward: no input gradient for the first layer

TINY = """
profile: tiny
seeds: [0, 1]
datasets:
  digits: {test_fraction: 0.25, split_seed: 0}
partitions:
  iid3: {dataset: digits, scheme: iid, clients: 3, seed: 0}
graphs:
  all3: {partition: iid3, topology: complete, seed: 0}
models:
  simsiam: {method: simsiam, backbone: cnn_small}
  byol: {method: byol, backbone: cnn_small, hparams: {proj_hidden_dim: 16, proj_output_dim: 8, pred_hidden_dim: 16}}
strategies:
  fedavg: {name: fedavg}
  fedema: {name: fedema}
  gossip: {name: fedavg, mixing: uniform}
pretrain:
  dataset: digits
  image_size: 8
  optimizers:
    cnn: {name: sgd, base_lr: 0.1}
    vit: {name: adamw, base_lr: 1.0e-3}
  fl:
    train: {rounds: 2, clients_per_round: 2, local_epochs: 1, batch_size: 100}
    grids:
      t1: {models: [simsiam], partitions: [iid3], strategies: [fedavg]}
      t2: {models: [byol], partitions: [iid3], strategies: [fedema]}
  decl:
    train: {rounds: 3, local_epochs: 2, batch_size: 100}
    grids:
      f2: {models: [simsiam], graphs: [all3], strategies: [gossip]}
  central:
    models: [simsiam]
    train: {epochs: 1, batch_size: 100}
  local:
    train: {epochs: 1, batch_size: 100}
    clients: {iid3: [0, 2]}
    grids:
      t5: {models: [simsiam], partitions: [iid3]}
evaluate:
  datasets: [digits]
  reestimate_batchnorm: true
  protocols: {fl: [finetune], decl: [], central: [], local: []}
  finetune: {val_fraction: 0.1, lr_grid: [1.0e-3], epochs: 2, batch_size: 100}
report:
  dataset: digits
  sections: {pretraining_gain: {}}
"""
# digits: 1797 images, test = ceil(0.25 * 1797) = 450, train 1347: 449 per client; 4 batches of 100 an epoch
SEEDS, PER_EPOCH = 2, 400
N_TRAIN, N_TEST, CLASSES = 1347, 450, 10


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> CostCache:
    return CostCache(tmp_path_factory.mktemp("cache") / "costs.json")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    (root / "params.yaml").write_text(TINY)
    profile = root / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump({"default-resources": {"runtime": 30},
                                                         "set-resources": {"pretrain_fl": {"runtime": "2h"}}}))
    return root


@pytest.fixture(scope="module")
def plan(project, cache):
    return make_plan(project / "params.yaml", project, gpu="a100", share=0.5, profile=Path("profile"), cache=cache)


def simsiam_costs(cache):
    return model_costs({"method": "simsiam", "backbone": "cnn_small"}, 8, 1, cache)


def test_flops_of_a_small_cnn_counted_by_hand():
    encoder = create_backbone("cnn_small", 8, 1)
    costs = encoder_costs(encoder, 8, 1)
    assert costs.forward == CNN_FORWARD and costs.train == CNN_TRAIN
    assert costs.feature_dim == 128 and costs.batchnorm
    assert costs.bytes == tensor_bytes(encoder.state_dict())


def test_attention_is_counted():
    """vit_small at 8 px: 16 patches of 2 px + the class token, 4 heads of 24; QK^T and AV cost 2 x 4 x 17 x 17 x 24
    each, in each of its 2 blocks (the fused kernels have no FLOP formula: the count runs them as math)."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    encoder = create_backbone("vit_small", 8, 1).eval()
    images = torch.rand(2, 1, 8, 8)
    with torch.no_grad():
        with FlopCounterMode(display=False) as fused:
            encoder(images)
        counted = count_flops(lambda: encoder(images))
    attention = 2 * 2 * (2 * 4 * 17 * 17 * 24)  # per image: 2 blocks x (QK^T + AV)
    assert counted == fused.get_total_flops() + 2 * attention  # a batch of 2


def test_meta_count_equals_the_cpu_count(cache):
    spec = {"method": "simsiam", "backbone": "cnn_small"}
    meta = simsiam_costs(cache)
    method = create_method("simsiam", "cnn_small", 8, 1).train()
    images = torch.rand(2, 1, 8, 8)
    on_cpu = count_flops(lambda: method.training_loss(images)["loss"].backward()) / 2
    assert meta.counted_on == "meta" and meta.train == on_cpu
    assert meta.train > 2 * CNN_TRAIN  # two views through the encoder, plus heads
    assert model_costs(spec, 8, 1, cache) == meta  # from the cache


def test_validation_counts_match_the_stratified_split():
    labels = np.repeat(np.arange(CLASSES), 134)
    _, val = stratified_split(labels, 0.1, seed=0)
    assert evaluation_counts(len(labels), CLASSES, 0.1) == len(val) == 130


def test_every_protocol_has_a_cost_model():
    encoder = encoder_costs(create_backbone("cnn_small", 8, 1), 8, 1)
    for name, protocol in PROTOCOL_SPECS.items():
        trained, forward, flops = protocol_work(protocol.make_config(), 1000, 200, 10, encoder, True)
        assert forward >= 1200 and flops > 0, name


def test_images_and_flops_of_each_stage(plan, cache):
    train_flops = simsiam_costs(cache).train
    fl = plan.stage("pretrain_fl@simsiam-iid3-fedavg")
    assert fl.images_trained == SEEDS * 2 * 2 * PER_EPOCH  # seeds x rounds x clients per round x one epoch
    assert fl.flops == {"plain": fl.images_trained * train_flops}
    decl = plan.stage("pretrain_decl@simsiam-all3-gossip")
    assert decl.images_trained == SEEDS * 3 * 3 * 2 * PER_EPOCH  # seeds x rounds x every client x 2 epochs
    central = plan.stage("pretrain_central@simsiam")
    assert central.images_trained == SEEDS * 1300  # 1347 pooled: 13 full batches
    local = plan.stage("pretrain_local@simsiam-iid3")
    assert local.images_trained == SEEDS * 2 * PER_EPOCH  # clients 0 and 2, each alone
    # fine-tuning on digits: 134 per class -> 13 validation images each; 1217 fit images, 2 epochs, 1 lr
    evaluation = plan.stage("evaluate_fl@simsiam-iid3-fedavg")
    fit, val = N_TRAIN - 130, 130
    head = 128 * CLASSES
    assert evaluation.images_trained == SEEDS * 2 * fit
    forward = N_TRAIN + 2 * val + N_TEST  # BatchNorm re-estimation, validation each epoch, test once
    assert evaluation.images_forward == SEEDS * forward
    expected = 2 * fit * (CNN_TRAIN + 6 * head) + forward * CNN_FORWARD + (2 * val + N_TEST) * 2 * head
    assert evaluation.total_flops == SEEDS * expected


def test_checkpoint_and_output_bytes(plan, cache):
    simsiam = create_method("simsiam", "cnn_small", 8, 1)
    model = tensor_bytes(simsiam.state_dict())
    fl = plan.stage("pretrain_fl@simsiam-iid3-fedavg")
    assert fl.checkpoint_round == model  # FedAvg of SimSiam: every tensor is shared, no client state
    assert fl.checkpoint_written == SEEDS * 2 * model and fl.checkpoint_disk == SEEDS * model
    assert fl.outputs == SEEDS * (model + tensor_bytes(simsiam.encoder.state_dict()))
    byol = create_method("byol", "cnn_small", 8, 1, proj_hidden_dim=16, proj_output_dim=8, pred_hidden_dim=16)
    whole = tensor_bytes(byol.state_dict())
    shared = tensor_bytes({k: v for k, v in byol.state_dict().items() if not k.startswith("target_")})
    fedema = plan.stage("pretrain_fl@byol-iid3-fedema")
    assert fedema.checkpoint_round == shared + 2 * whole  # the global model + the 2 clients that trained
    # DecL: every client's row (integer tensors as float64) each round
    row = sum(t.numel() * (t.element_size() if t.is_floating_point() else 8) for t in simsiam.state_dict().values())
    decl = plan.stage("pretrain_decl@simsiam-all3-gossip")
    assert decl.checkpoint_round == 3 * (row + 8) and decl.checkpoint_written == SEEDS * 3 * decl.checkpoint_round
    assert plan.datasets["digits"] == {"sizes": {"train": N_TRAIN, "test": N_TEST}, "shape": [1, 8, 8],
                                       "bytes": (N_TRAIN + N_TEST) * 64}


def test_gpu_hours_at_an_assumed_share_of_peak_and_per_table(plan):
    rate = 0.5 * 19.5e12
    fl = plan.stage("pretrain_fl@simsiam-iid3-fedavg")
    assert plan.hours[fl.stage] == pytest.approx(fl.total_flops / rate / 3600)
    assert "assumed 50% of the NVIDIA A100 SXM's 19.5 TFLOP/s fp32 peak" in plan.rates["cnn_small", "plain"].source
    assert plan.tables["t1"] == ["pretrain_fl@simsiam-iid3-fedavg", "evaluate_fl@simsiam-iid3-fedavg"]
    assert (plan.tables["t5"] == ["pretrain_local@simsiam-iid3"]
            and plan.tables["central"] == ["pretrain_central@simsiam"])
    assert "prepare@digits" in plan.tables["data"]
    totals = plan.table_totals()
    assert totals["t1"]["gpu_hours"] == pytest.approx(plan.hours[fl.stage]
                                                      + plan.hours["evaluate_fl@simsiam-iid3-fedavg"])
    assert totals["all stages"]["gpu_hours"] == pytest.approx(sum(t["own_gpu_hours"] for name, t in totals.items()
                                                                  if name != "all stages"))


def test_measured_throughput_and_jobs_past_their_runtime(project, cache, tmp_path):
    flops = simsiam_costs(cache).train
    results = tmp_path / "gpu_round.json"
    row = {"device": "cuda", "device_name": "NVIDIA Test GPU", "method": "simsiam", "backbone": "cnn_small",
           "option": "plain", "size": 8, "batch": 128, "images_per_s": 1e-3, "flops_per_image": flops,
           "date": "2026-01-01T00:00:00Z"}
    merge_results(results, [{**row, "option": "bf16"}])
    merge_results(results, [row, {**row, "images_per_s": 5.0, "option": "bf16"}])  # replaces the bf16 row
    assert [r["images_per_s"] for r in json.loads(results.read_text())] == [5.0, 1e-3]
    plan = make_plan(project / "params.yaml", project, results=results, profile=Path("profile"), cache=cache)
    fl = plan.stage("pretrain_fl@simsiam-iid3-fedavg")
    assert plan.hours[fl.stage] == pytest.approx(fl.images_trained / 1e-3 / 3600)  # images / measured images/s
    assert plan.rates["cnn_small", "plain"].measured
    over = {job.stage: job.limit_minutes for job in plan.over_limit()}
    # pretrain_fl requests 2 h; every other rule the default 30 minutes
    assert over["pretrain_fl@simsiam-iid3-fedavg"] == 120 and over["pretrain_decl@simsiam-all3-gossip"] == 30
    decl_hours = plan.hours["pretrain_decl@simsiam-all3-gossip"]
    assert plan.suggested_runtimes()["pretrain_decl"] == 60 * math.ceil(decl_hours * 1.5)
    text = render(plan)
    assert (f"WARNING pretrain_fl@simsiam-iid3-fedavg: {plan.hours[fl.stage]:,.1f} GPU-h > "
            "pretrain_fl's runtime 120 min") in text
    assert "measured by benchmarks/gpu_round.py on NVIDIA Test GPU" in text


def test_runtimes_in_snakemake_units():
    assert [parse_runtime(v) for v in (90, "90", "2h", "1d", "30m", "90s", "1.5h")] == [90, 90, 120, 1440, 30, 1.5, 90]
    with pytest.raises(ValueError, match="cannot read the runtime 'soon'"):
        parse_runtime("soon")


def test_the_plans_checkpoint_bytes_are_what_a_run_writes(tmp_path, cache):
    """FedEMA with BYOL, 4 clients, 2 per round: the bytes each round's checkpoint wrote (simulator)
    against the plan's global model + 2 client states (torch.save adds a little metadata)."""
    from dssl.data.imageset import ArrayImageSet
    from dssl.federation import ClientData, FLConfig, FLSimulator, OptimizerConfig, create_strategy

    spec = {"method": "byol", "backbone": "cnn_small", "hparams": {"proj_hidden_dim": 16, "proj_output_dim": 8,
                                                                  "pred_hidden_dim": 16}}
    states = state_costs(spec, {"name": "fedema"}, 8, 1, cache)
    torch.manual_seed(0)
    method = create_method("byol", "cnn_small", 8, 1, **spec["hparams"])
    images = ArrayImageSet(np.zeros((16, 8, 8, 1), dtype=np.uint8), np.zeros(16, dtype=np.int64), 2)
    clients = [ClientData(images, np.arange(4 * i, 4 * i + 4)) for i in range(4)]
    config = FLConfig(rounds=3, clients_per_round=2, batch_size=2, optimizer=OptimizerConfig(base_lr=0.01))
    records: list[dict] = []
    FLSimulator(method, clients, create_strategy("fedema"), config, checkpoint_dir=tmp_path).run(records.append)
    planned = states.global_bytes + 2 * states.client_bytes
    for record in records:
        assert planned < record["checkpoint_bytes"] < planned * 1.05 + 64 * 1024


def test_a_params_problem_is_an_error_but_a_missing_dataset_folder_a_note(tmp_path, cache):
    params = yaml.safe_load(TINY)
    params["datasets"]["mini_imagenet"] = {"root": "data/raw/mini_imagenet", "image_size": 8}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    plan = make_plan(tmp_path / "params.yaml", tmp_path, cache=cache)
    assert any(note.startswith("datasets.mini_imagenet.root: folder") and "published sizes (train 60,000)" in note
               for note in plan.notes)
    assert plan.datasets["mini_imagenet"]["bytes"] == 60_000 * 3 * 8 * 8
    params["partitions"]["iid3"]["clients"] = 0
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ParamsError, match="partitions.iid3.clients"):
        make_plan(tmp_path / "params.yaml", tmp_path, cache=cache)


@pytest.mark.parametrize("params_file, tables", [
    ("configs/paper.yaml", ["table1", "fig2b", "table8", "table7", "table2", "table2-byol", "fig2a", "table6",
                            "table5"]),
    ("configs/paper_b.yaml", ["methods", "fedema", "lambda", "ablations"]),
])
def test_the_cli_prints_gpu_hours_per_table_of_the_paper_profiles(params_file, tables, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("DSSL_CACHE_DIR", str(tmp_path))
    assert main(["plan", params_file, "--results", str(tmp_path / "none.json")]) == 0
    text = capsys.readouterr().out
    assert f"plan of {params_file}" in text and "GPU-hours per table" in text
    rows = {line.split()[0]: line for line in text.splitlines()
            if line.startswith("  ") and len(line.split()) > 4 and "GPU-h" not in line}
    for table in tables:
        assert table in rows, table
    assert re.search(r"all stages\s+\d+\s", text)
    assert (tmp_path / "plan-costs.json").is_file()  # counted once, cached for the next plan
    assert main(["plan", params_file, "--json", "--results", str(tmp_path / "none.json")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert all(data["tables"][t]["gpu_hours"] > 0 for t in tables)
    assert all(job["hours"] > 0 for job in data["jobs"])


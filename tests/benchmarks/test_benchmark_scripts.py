"""The README's benchmark scripts run from a checkout and print their figure lines. They run at their
smallest settings: these tests check that the scripts work and what they compute, not how fast anything
is (speed is what the scripts themselves report)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

pytestmark = pytest.mark.slow


def run_script(name: str, *args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), BENCHMARKS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, args, figure", [
    ("data_path.py", ["--images", "40", "--classes", "2", "--epochs", "1"], r"^prepared_speedup: \d+\.\dx$"),
    ("fl_overhead.py", ["--rounds", "1", "--threads", "1"], r"^overhead ratio\s+\d+\.\d{3} "),
    ("decl_gossip.py", ["--rounds", "1"], r"^gossip_share: \d+\.\d+ %"),
    ("gpu_round.py", ["--device", "cpu", "--models", "resnet18_imagenet", "--options", "channels_last", "--size", "32",
                      "--batch", "4", "--steps", "1", "--threads", "1"], r"^resnet18_imagenet\s+channels_last\s+\d"),
    ("determinism_fill.py", ["--models", "simsiam:cnn_small", "--steps", "1", "--repeats", "1"],
     r"^simsiam\s+cnn_small\s+step with fill\s+\d+\.\d\d ms, without\s+\d+\.\d\d ms\s+saving\s+-?\d+\.\d %$"),
    ("checkpoint_bytes.py", ["--clients", "10", "--per-round", "2", "--rounds", "2", "--backbone", "cnn_small",
                             "--size", "8"],
     r"^bytes_per_round: \d+\.\d{3} GiB \(2 client states .* at most these: yes\)$"),
    ("divergence_scales.py", ["--rounds", "2", "--clients", "2", "--per-round", "2", "--images", "64",
                              "--threads", "1"],
     r"^ratio flat/paper: \d+\.\d\d \.\. \d+\.\d\d \(median \d+\.\d\d\)$"),
], ids=["data_path", "fl_overhead", "decl_gossip", "gpu_round", "determinism_fill", "checkpoint_bytes",
      "divergence_scales"])
def test_a_benchmark_prints_its_figure(name, args, figure, tmp_path):
    done = run_script(name, *args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(figure, done.stdout, re.MULTILINE), done.stdout[-3000:]


@pytest.mark.skipif(importlib.util.find_spec("flwr") is not None, reason="Flower is installed here")
def test_vs_flower_without_flower_says_how_to_install_it(tmp_path):
    done = run_script("vs_flower.py", "--rounds", "3", "--repeats", "1", cwd=tmp_path)
    assert done.returncode != 0
    assert "pip install -e '.[bench]'" in done.stdout + done.stderr


def test_vs_flower_our_two_sides_train_the_same_steps_to_the_same_losses(tmp_path):
    """The simulator with client workers and in series (the plain loop) run the same training."""
    results = {}
    for side in ("ours", "in series"):
        result = tmp_path / f"{side}.json"
        done = run_script("vs_flower.py", "--side", side, "--result", str(result), "--rounds", "3",
                          "--client-images", "32", "--client-workers", "2", cwd=tmp_path)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        results[side] = json.loads(result.read_text())
    ours, serial = results["ours"], results["in series"]
    assert len(ours["rounds"]) == 3 and ours["steps"] == [5, 5, 5]  # 5 clients x 1 step of 32
    assert ours["loss"] == serial["loss"]


def test_vs_flower_compares_steady_rounds_against_the_compute_floor():
    vs_flower = load_script("vs_flower.py")
    ours = {"startup": 1.0, "rounds": [0.5, 0.1, 0.12, 0.1], "train": [0.3, 0.16, 0.16, 0.2]}
    serial = {"startup": 1.0, "rounds": [0.5, 0.2, 0.2, 0.2]}
    flower = {"startup": 0.0, "rounds": [10.0, 0.7, 0.4, 0.4], "total": 12.0}
    figures = vs_flower.compare({"ours": ours, "in series": serial, "flower": flower}, workers=2)
    assert figures["ours"] == pytest.approx(0.1) and figures["flower"] == pytest.approx(0.4)  # medians after round 1
    assert figures["ratio"] == pytest.approx(4.0) and figures["serial_ratio"] == pytest.approx(2.0)
    assert figures["floor"] == pytest.approx(0.08)  # median training per round (0.16) over 2 workers
    assert figures["bound"] == pytest.approx(5.0)
    # whole clients: 0.16 / 5 clients = 0.032 each; the busier of 2 workers trains 3 of the 5
    assert figures["whole_floor"] == pytest.approx(0.096)
    assert figures["whole_bound"] == pytest.approx(0.4 / 0.096)
    assert figures["ours_above_whole"] == pytest.approx(0.1 - 0.096)
    assert figures["end_to_end"] == pytest.approx(12.0 / (1.0 + 0.82))


def test_gpu_round_writes_the_results_a_plan_reads(tmp_path):
    """Rows with the images/s and the FLOPs per image of the same step (their product: the FLOP rate)."""
    from dssl.planning.costs import method_flops, build_method as build

    results = tmp_path / "gpu_round.json"
    args = ["--device", "cpu", "--models", "cnn_small", "--options", "plain", "--size", "16", "--batch", "4",
            "--steps", "1", "--threads", "1", "--results", str(results)]
    done = run_script("gpu_round.py", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"wrote 1 rows to {results}" in done.stdout
    (row,) = json.loads(results.read_text())
    assert ((row["device"], row["backbone"], row["option"], row["size"], row["batch"])
            == ("cpu", "cnn_small", "plain", 16, 4))
    assert row["images_per_s"] > 0
    expected = method_flops(build({"method": "simsiam", "backbone": "cnn_small"}, 16, 3, "cpu"), 16, 3)
    assert row["flops_per_image"] == expected


def test_paper_smoke_runs_every_stage_kind_at_its_smallest_setting(tmp_path):
    """The CI profile has every kind (FL, DecL, central, stand-alone; linear probe and fine-tuning)."""
    done = run_script("paper_smoke.py", "--params", "configs/ci.yaml", "--device", "cpu", "--size", "16", "--batch",
                      "4", "--steps", "1", "--threads", "1", cwd=tmp_path, env={"DSSL_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for kind in ("pretrain_fl", "pretrain_decl", "pretrain_central", "pretrain_local"):
        assert re.search(rf"^{kind}\s+\S+\s+{kind}@\S+\s+\d+\.\d\s+\d+\.\d{{3}}\s+\d+\s+\d[\d,.]* MiB", out, re.M), kind
    for protocol in ("linear_probe", "finetune"):
        assert re.search(rf"^evaluate\s+\S+\s+{protocol}\s+\d+\.\d\s+\d+\.\d{{3}}\s+\d+\s+-$", out, re.M), protocol
    assert re.search(r"^  pretrain_decl\s+\d+\s+\d[\d,.]*\s+\d[\d,.]*$", out, re.M)
    assert re.search(r"^  all\s+\d+\s+\d[\d,.]*$", out, re.M)


def test_paper_smoke_asked_for_cuda_without_a_gpu_stops_with_one_error(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = run_script("paper_smoke.py", "--device", "cuda", cwd=tmp_path)
    assert done.returncode != 0
    assert "paper_smoke.py: --device cuda needs a GPU, but torch sees none" in done.stderr
    assert "Traceback" not in done.stderr and not done.stdout


def test_paper_smoke_runs_every_evaluation_protocol():
    import argparse

    import torch

    from dssl.config.protocols import PROTOCOL_SPECS

    smoke = load_script("paper_smoke.py")
    args = argparse.Namespace(size=8, batch=4, steps=2)
    for protocol in PROTOCOL_SPECS.names():
        row = smoke.evaluation_run(args, {"evaluate": {protocol: {}}}, protocol, "cnn_small", torch.device("cpu"))
        assert row["images_per_s"] > 0 and row["flops_per_s"] > 0, protocol


@pytest.mark.parametrize("profile", ["configs/paper.yaml", "configs/paper_b.yaml"])
def test_paper_smoke_cuts_each_paper_profiles_protocols_to_one_epoch(profile):
    """The profiles' own evaluation sections (fine-tuning with 5 warm-up epochs, say) in one epoch."""
    import argparse

    import torch

    from dssl.planning.plan import load_plan_params

    smoke = load_script("paper_smoke.py")
    params, _ = load_plan_params(ROOT / profile, ROOT)
    protocols = {p for names in params["evaluate"]["protocols"].values() for p in names or []}
    args = argparse.Namespace(size=8, batch=4, steps=2)
    for protocol in sorted(protocols):
        row = smoke.evaluation_run(args, params, protocol, "cnn_small", torch.device("cpu"))
        assert row["images_per_s"] > 0, protocol


def test_paper_smoke_reports_a_refused_run_and_goes_on(monkeypatch, capsys, tmp_path):
    """A run torch stops is one FAILED row with the error's first line; the rest run; exit status 1."""
    import torch

    smoke = load_script("paper_smoke.py")
    train_run = smoke.train_run

    def refuse_decl(args, params, kind, *rest):
        if kind == "pretrain_decl":
            raise RuntimeError("some_op does not have a deterministic implementation\nmore text")
        return train_run(args, params, kind, *rest)

    monkeypatch.setattr(smoke, "train_run", refuse_decl)
    monkeypatch.setenv("DSSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("sys.argv", ["paper_smoke.py", "--params", "configs/ci.yaml", "--device", "cpu", "--size", "16",
                                     "--batch", "4", "--steps", "1", "--threads", "1"])
    threads = torch.get_num_threads()
    try:
        assert smoke.main() == 1
    finally:
        torch.set_num_threads(threads)  # main() sets the process's thread count
    out = capsys.readouterr().out
    assert re.search(r"^pretrain_decl\s+\S+\s+pretrain_decl@\S+\s+FAILED: some_op does not have a deterministic "
                     r"implementation$", out, re.M), out
    assert re.search(r"^pretrain_fl\s+\S+\s+pretrain_fl@\S+\s+\d+\.\d", out, re.M)
    assert re.search(r"^evaluate\s+\S+\s+linear_probe\s+\d+\.\d", out, re.M)
    assert "1 run(s) FAILED (above)" in out


@pytest.mark.parametrize("kind", ["pretrain_fl", "pretrain_decl", "pretrain_central", "pretrain_local"])
def test_paper_smoke_trains_each_kind_with_its_sections_step_options(kind):
    """Every kind with the precision and memory format its params section gives (bf16 + channels_last
    in the paper profile), as the pipeline's stage would; only the counts are the smoke's."""
    from dssl.planning.plan import load_plan_params

    smoke = load_script("paper_smoke.py")
    params, _ = load_plan_params(ROOT / "configs/paper.yaml", ROOT)
    fields = next(f for k, f, _ in smoke.runs(params) if k == kind)
    steps = smoke.step_schedule(params, kind.removeprefix("pretrain_"), fields.get("strategy"))
    assert steps["precision"] == "bf16" and steps["channels_last"] is True
    assert not {"rounds", "epochs", "local_epochs", "batch_size", "clients_per_round", "device"} & set(steps)


def test_paper_smoke_each_runs_every_training_path_of_the_profile():
    """``--each``: one run per kind, backbone, method and strategy of the profile, none twice."""
    from dssl.pipeline.catalogue import instances
    from dssl.planning.plan import load_plan_params

    smoke = load_script("paper_smoke.py")
    params, _ = load_plan_params(ROOT / "configs/paper.yaml", ROOT)

    def key(kind: str, fields: dict) -> tuple:
        spec = params["models"][fields["model"]]
        return kind, spec["backbone"], spec["method"], fields.get("strategy")

    each = [key(kind, fields) for kind, fields, _ in smoke.runs(params, each=True)]
    paths = {key(i.kind.name, i.fields) for i in instances(params) if i.kind.name.startswith("pretrain_")}
    assert sorted(each) == sorted(paths) and len(paths) > len(smoke.runs(params))


def test_gpu_determinism_compares_two_runs_per_setting(tmp_path):
    """On a CPU both settings give the same bits twice (on a GPU warn-only does not for Tiny-ViT)."""
    done = run_script("gpu_determinism.py", "--device", "cpu", "--size", "16", "--batch", "2", "--steps", "1",
                      "--rounds", "1", "--settings", "warn-only,strict", "--cases", "simsiam:tiny_vit", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = re.findall(r"^(simsiam)\s+(tiny_vit)\s+(warn-only|strict)\s+(yes|no)\s+(\S+)\s+\d+\.\d$", done.stdout, re.M)
    assert len(rows) == 2 and all(same == "yes" and float(gap) == 0 for *_, same, gap in rows), done.stdout


def test_backbone_throughput_times_each_model_of_the_params_file(tmp_path):
    """A row per model named, each with a rate and two step times; the GEMM reference line last; a name
    the params file lacks is refused before anything is timed."""
    done = run_script("backbone_throughput.py", "--params", str(ROOT / "params.yaml"), "--models", "simsiam-cnn",
                      "mae-vit", "byol-cnn", "--batch-size", "4", "--warmup", "0", "--seconds", "0.01",
                      cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "8 x 8 px, batch 4, eager" in done.stdout   # the params file's image size
    rows = re.findall(r"^(\S+)\s+(\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)$", done.stdout, re.M)
    assert [row[0] for row in rows] == ["simsiam-cnn", "mae-vit", "byol-cnn"], done.stdout
    assert all(int(rate) > 0 and float(step) > 0 and float(smallest) > 0 for _, rate, step, smallest in rows)
    assert re.search(r"^GEMM 288x96 @ 96x288: \d+\.\d GFLOP/s$", done.stdout, re.M), done.stdout
    refused = run_script("backbone_throughput.py", "--params", str(ROOT / "params.yaml"), "--models", "mae-vti",
                         cwd=tmp_path)
    assert refused.returncode == 2 and "--models: ['mae-vti'] are not models of" in refused.stderr
    assert "model " not in refused.stdout


def test_theory_bench_times_the_sweep_and_checks_the_claims(tmp_path):
    """At one d: the sweep's and the improvement study's rows and times, and one verdict per claim."""
    out = tmp_path / "out"
    done = run_script("theory_bench.py", "--d", "64", "--jobs", "1", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    stdout = done.stdout
    # 3 seeds x 3 methods x (local, FL, 8 graphs); improvement: 2 graphs of |A| <= 3 x 4 criteria x 3 seeds x 6 steps
    sweep = re.search(r"^sweep\s+(\d+\.\d) s  \(90 rows\)$", stdout, re.M)
    improvement = re.search(r"^improvement\s+(\d+\.\d) s  \(144 rows\)$", stdout, re.M)
    total = re.search(r"^total\s+(\d+\.\d) s$", stdout, re.M)
    assert sweep and improvement and total, stdout
    assert float(total[1]) == pytest.approx(float(sweep[1]) + float(improvement[1]), abs=0.11)
    claims = re.findall(r"^  (\S+)\s+from d=(64|None)  \{64: (True|False)\}$", stdout, re.M)
    assert [c[0] for c in claims] == [c["claim_id"] for c in json.loads((out / "theory_claims.json").read_text())]
    assert all((since == "64") == (holds == "True") for _, since, holds in claims)
    assert len((out / "theory_sweep.csv").read_text().splitlines()) == 1 + 90


def test_dvc_lock_overhead_times_both_layouts(tmp_path):
    """Seconds per stage with one dvc.lock and with one per group, and their ratio; the scratch projects go."""
    done = run_script("dvc_lock_overhead.py", "--stages", "2", "--files", "2", cwd=tmp_path,
                      env={"TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    one = re.search(r"^  one dvc\.lock:\s+(\d+\.\d{3}) s per stage$", done.stdout, re.M)
    split = re.search(r"^  2 lock files:\s+(\d+\.\d{3}) s per stage$", done.stdout, re.M)
    ratio = re.search(r"^dvc_overhead_ratio: (\d+\.\d\d)x$", done.stdout, re.M)
    assert one and split and ratio, done.stdout
    assert float(ratio[1]) == pytest.approx(float(one[1]) / float(split[1]), rel=0.02)
    assert not list(tmp_path.glob("dvc-lock-*"))


def test_dvc_lock_overhead_projects_run_every_stage_into_their_lock_files(tmp_path):
    """The timed projects run each stage; the split one keeps one dvc.lock per group of stages."""
    bench = load_script("dvc_lock_overhead.py")
    one, split = bench.project(tmp_path / "one", 2, 1), bench.project(tmp_path / "split", 2, 2)
    bench.seconds_per_stage(one, 2, False)
    bench.seconds_per_stage(split, 2, True)
    for root in (one, split):
        assert [(root / f"out/s{i}/f3.txt").read_text() for i in (0, 1)] == ["0-3\n", "1-3\n"]
    assert list(yaml.safe_load((one / "dvc.lock").read_text())["stages"]) == ["s0", "s1"]
    for group in (0, 1):
        lock = yaml.safe_load((split / f"pipelines/g{group}/dvc.lock").read_text())
        assert list(lock["stages"]) == [f"s{group}"]
    assert not (split / "dvc.lock").exists()


def kind_rows(out: str) -> dict[str, list[str]]:
    """A printed per-kind table of the stages prepare and pretrain_central: {kind: its cells}."""
    return {line.split()[0]: line.split()[1:] for line in out.splitlines()
            if line.startswith(("prepare ", "pretrain_central "))}


@pytest.fixture(scope="module")
def overhead_run(tmp_path_factory):
    """pipeline_overhead.py around two CI-profile stages in a scratch project with its own MLflow store."""
    root = tmp_path_factory.mktemp("project")
    shutil.copy(ROOT / "configs" / "ci.yaml", root / "params.yaml")
    path = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = run_script("pipeline_overhead.py", "--root", str(root), "--profile", "ci", "--interval", "0.2", "--",
                      "sh", "-c", "dssl prepare digits && dssl pretrain_central simsiam-cnn", cwd=root, env=path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root, done.stdout


def test_pipeline_overhead_splits_the_wall_time_around_the_stages(overhead_run):
    """Wall time = time inside the stages + between them; CPU use; per kind its stage time, speed and memory."""
    _, out = overhead_run
    split = re.search(r"^stages: 2  wall: (\d+) s  inside stages: (\d+) s  between stages: (-?\d+) s = "
                      r"-?\d+\.\d % of wall$", out, re.M)
    assert split, out
    wall, inside, between = map(int, split.groups())
    assert abs(wall - inside - between) <= 1
    assert re.search(r"^CPU utilisation \(all \d+ cores\): training stages \d+ %, whole run \d+ %$", out, re.M), out
    assert re.search(r"^\s+stages\s+inside_s\s+images_per_s\s+peak_rss_mb$", out, re.M), out
    rows = kind_rows(out)
    assert rows["prepare"][0] == rows["pretrain_central"][0] == "1"  # the two seeds' runs are one stage
    assert rows["prepare"][2] == "NaN" and float(rows["pretrain_central"][2]) > 0  # only training has a speed
    assert sum(float(row[1]) for row in rows.values()) == pytest.approx(inside, abs=1)


def test_stage_times_reads_the_same_stages_from_the_store(overhead_run):
    """Per kind the stage count, time, memory and speed that pipeline_overhead.py read from the same runs."""
    root, overhead = overhead_run
    done = run_script("stage_times.py", "--profile", "ci", "--root", str(root), cwd=root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^\s+stages\s+total_s\s+max_s\s+max_peak_rss_mb\s+images_per_s$", done.stdout, re.M)
    rows, expected = kind_rows(done.stdout), kind_rows(overhead)
    assert set(rows) == {"prepare", "pretrain_central"}
    for kind, (stages, total, largest, memory, speed) in rows.items():
        assert (stages, total, memory, speed) == tuple(expected[kind][i] for i in (0, 1, 3, 2)), kind
        assert largest == total  # one stage of each kind
    summed = sum(float(row[1]) for row in rows.values())   # of the rows' rounded times: within 0.1 s of the script's
    total = re.search(r"^all stages: 2, summed stage time (\d+) s$", done.stdout, re.M)
    assert total and abs(int(total.group(1)) - summed) <= 0.6, done.stdout


def write_lock(path: Path, stages: dict) -> None:
    """A dvc.lock with these stages, beside the dvc.yaml that makes it a pipeline folder's lock file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))
    path.with_name("dvc.yaml").write_text(yaml.safe_dump({"stages": {}}))


def lock_entry(params_value: int, out_md5: str) -> dict:
    return {"cmd": "dssl pretrain_fl m p s --params params.yaml",
            "deps": [{"path": "data/prepared/digits", "hash": "md5", "md5": "a" * 32 + ".dir"}],
            "params": {"params.yaml": {"pretrain.fl.train": {"rounds": params_value}}},
            "outs": [{"path": "models/fl/m", "hash": "md5", "md5": out_md5}]}


def test_stage_times_against_compares_only_stages_with_the_same_inputs(tmp_path):
    """--against: a stage counts only where its command, dependencies and params equal the other tree's (its
    outputs may differ); the ratio is the shared stages' summed seconds here over there."""
    import pandas as pd

    stage_times = load_script("stage_times.py")
    here_root, there_root = tmp_path / "here", tmp_path / "there"
    write_lock(here_root / "dvc.lock", {"code": lock_entry(1, "c" * 32)})
    write_lock(here_root / "pipelines" / "pretrain_fl" / "m" / "dvc.lock",
               {"pretrain_fl@same": lock_entry(60, "b" * 32), "pretrain_fl@moved": lock_entry(90, "b" * 32),
                "pretrain_fl@new": lock_entry(60, "b" * 32)})
    write_lock(there_root / "dvc.lock", {"code": lock_entry(1, "d" * 32)})   # other outputs, same inputs
    write_lock(there_root / "pipelines" / "pretrain_fl" / "m" / "dvc.lock",
               {"pretrain_fl@same": lock_entry(60, "e" * 32), "pretrain_fl@moved": lock_entry(60, "b" * 32)})
    inputs_here, inputs_there = stage_times.stage_inputs(here_root), stage_times.stage_inputs(there_root)
    assert inputs_here["pretrain_fl@same"].outs == () and inputs_here["pretrain_fl@same"].cmd.startswith("dssl")
    here = pd.Series({"code": 4.0, "pretrain_fl@same": 120.0, "pretrain_fl@moved": 50.0, "pretrain_fl@new": 9.0})
    there = pd.Series({"code": 5.0, "pretrain_fl@same": 100.0, "pretrain_fl@moved": 99.0})
    table = stage_times.shared_stage_seconds(here, there, inputs_here, inputs_there)
    assert sorted(table.index) == ["code", "pretrain_fl@same"]
    assert table["kind"].to_dict() == {"code": "code", "pretrain_fl@same": "pretrain_fl"}
    assert table["here_s"].sum() / table["there_s"].sum() == pytest.approx(124 / 105)


def test_stage_times_refuses_a_folder_without_a_store_and_creates_none(tmp_path):
    """--root or --against naming a folder where no run was made: one line naming the missing store, and the
    folder stays empty (MLflow would create an empty store on opening it)."""
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "stage_times.py"), "--root", str(empty)], cwd=tmp_path,
                          env={**env, "PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (f"{empty / 'mlflow.db'}: no MLflow store; --root and --against "
                                                    "name finished trees (where `make repro` ran)")
    assert list(empty.iterdir()) == []


def test_warm_server_times_each_stage_cold_and_warm(tmp_path):
    """A row per stage command with its cold and warm wall times and the difference."""
    done = run_script("warm_server.py", "--repeats", "1", cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = re.findall(r"^(\w+)\s+cold\s+(\d+\.\d\d) s  warm\s+(\d+\.\d\d) s  saved\s+(-?\d+\.\d\d) s per stage "
                      r"\(median of 1\)$", done.stdout, re.M)
    assert [row[0] for row in rows] == ["prepare", "partitions"], done.stdout
    for _, cold, warm, saved in rows:
        assert float(saved) == pytest.approx(float(cold) - float(warm), abs=0.011)


def test_pretraining_margin_pairs_each_cell_with_random_init(tmp_path):
    """A row per model x cell x protocol against the same random-init scores; the margin is their paired difference."""
    cells = ["central", "fl-iid:fedavg", "uniform-3:decl-uniform"]
    work = tmp_path / "work"
    done = run_script("pretraining_margin.py", "--params", str(ROOT / "params.yaml"), "--models", "simsiam-cnn",
                      "--cells", *cells, "--protocols", "knn", "--seeds", "0", "1",
                      "--set", "pretrain.fl.train.rounds=1", "--set", "pretrain.decl.train.rounds=1",
                      "--set", "pretrain.central.train.epochs=1", "--workdir", str(work), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"^# .* \| dataset digits \| seeds \[0, 1\] \| BN re-estimation on \| wall \d+ s$", out, re.M)
    pp = r"[+-]\d+\.\d"
    rows = re.findall(rf"^simsiam-cnn\s+(\S+)\s+knn\s+(\d+\.\d)\s+(\d+\.\d)\s+({pp}) \[({pp}), ({pp})\]\s+\d+\s+"
                      rf"-?\d+\.\d{{3}}  per seed: ({pp}) ({pp})$", out, re.M)
    assert [row[0] for row in rows] == cells, out
    assert len({row[1] for row in rows}) == 1  # every cell pairs with the same random-init tasks
    for _, *figures in rows:
        random, pretrained, diff, low, high, *per_seed = map(float, figures)
        assert diff == pytest.approx(pretrained - random, abs=0.15)
        assert diff == pytest.approx(sum(per_seed) / 2, abs=0.1)
        assert low <= diff <= high
    params = yaml.safe_load((work / "params.yaml").read_text())
    assert (params["pretrain"]["fl"]["train"]["rounds"], params["seeds"]) == (1, [0, 1])


def test_fresh_clone_times_both_commands_and_compares_the_claims_with_each_record(tmp_path):
    """A 'run' that reports one record's claims verbatim: byte-equal to that record, a line for every other
    record, the two commands' seconds, the stage count from the run's log and the table row."""
    records = sorted(p.name for p in (ROOT / "reports/verdicts").iterdir() if (p / "claims.csv").is_file())
    copy = ("mkdir -p reports/sections && cp reports/verdicts/avx512-kernels/claims.csv reports/sections/ "
            "&& echo \"Running stage 'a':\" && echo \"Running stage 'b':\"")
    clone = tmp_path / "clone"
    done = run_script("fresh_clone.py", "--dir", str(clone), "--setup", "true", "--repro", copy, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert f"commit: {head[:10]}" in out and "2 stages run" in out
    assert re.search(r"^setup: \d+ s$", out, re.M) and re.search(r"^repro: \d+ s$", out, re.M)
    assert re.search(r"^in all: \d+\.\d min \(within the 30-minute budget\)$", out, re.M)
    assert "record avx512-kernels: claims.csv byte-equal" in out
    assert [r for r in records if f"record {r}: claims.csv" in out] == records
    assert re.search(rf"^row: \| {head[:7]} \| .+ \| \d+ s \| \d+ s \| \*\*\d+\.\d min\*\* \|$", out, re.M)
    assert re.search(r"^stage times: none \(.+mlflow\.db: no MLflow store; .+\)$", out, re.M)
    assert (clone / "reports/sections/claims.csv").is_file() and (tmp_path / "clone.repro.log").is_file()


def test_fresh_clone_refuses_an_existing_folder_and_stops_at_a_failing_command(tmp_path):
    (tmp_path / "taken").mkdir()
    done = run_script("fresh_clone.py", "--dir", str(tmp_path / "taken"), cwd=tmp_path)
    assert done.returncode != 0 and "exists: name a new folder" in done.stderr
    done = run_script("fresh_clone.py", "--dir", str(tmp_path / "clone"), "--setup", "echo broken; exit 3",
                      cwd=tmp_path)
    assert done.returncode != 0
    assert "`echo broken; exit 3` failed (exit 3)" in done.stderr and "broken" in done.stderr
    assert "repro:" not in done.stdout


def test_fresh_clone_refuses_an_against_folder_without_a_run_before_cloning(tmp_path):
    """--against names a tree to compare the run's speed with: one where no run was made is refused before
    the clone and its half-hour run start."""
    (tmp_path / "not-a-run").mkdir()
    done = run_script("fresh_clone.py", "--dir", str(tmp_path / "clone"), "--against", str(tmp_path / "not-a-run"),
                      cwd=tmp_path)
    assert done.returncode != 0 and "not-a-run: no mlflow.db there" in done.stderr
    assert not (tmp_path / "clone").exists()


def test_fresh_clone_reads_the_speed_ratio_stage_times_prints(tmp_path):
    """The clone's stage_times.py --against line gives the ratio; the run's time at the other tree's speed is
    the run's divided by it (set-up as measured); without shared stages the script's last line says why."""
    fresh_clone, stage_times = load_script("fresh_clone.py"), load_script("stage_times.py")
    line = stage_times.shared_line(2785.4, 2993.0)
    assert float(fresh_clone.RATIO.search(f"header\n{line}\nthis run's ...").group(1)) == pytest.approx(0.931, abs=1e-3)
    clone = tmp_path / "clone"
    (clone / "benchmarks").mkdir(parents=True)
    (clone / "benchmarks/stage_times.py").write_text(f"print('per kind')\nprint({line!r})\n")
    said = fresh_clone.speed_against(clone, tmp_path / "tree", setup=37.0, repro=1567.0)
    assert said.endswith("took 0.93x their time there; at its speed `repro` ~1683 s, 28.7 min in all")
    failing = "import sys\nsys.exit('no stage of it ran with the same inputs')\n"
    (clone / "benchmarks/stage_times.py").write_text(failing)
    assert fresh_clone.speed_against(clone, tmp_path / "tree", 37.0, 1567.0).endswith(
        "none (no stage of it ran with the same inputs)")


def test_pretraining_margin_takes_seeds_without_the_figure_seed():
    """Seeds the params file never used (10-14) need no ``--set features.seed=...``: Fig. 3's seed follows
    the first seed given, or stays when it is among them."""
    module = load_script("pretraining_margin.py")
    params = {"seeds": [10, 11, 12], "features": {"seed": 0, "dataset": "digits"}}
    module.follow_figure_seed(params)
    assert params["features"] == {"seed": 10, "dataset": "digits"}
    params = {"seeds": [3, 0], "features": {"seed": 0}}
    module.follow_figure_seed(params)
    assert params["features"]["seed"] == 0
    module.follow_figure_seed(no_features := {"seeds": [5]})
    assert no_features == {"seeds": [5]}

"""Fine-tuning and the linear probes resume from their checkpoints to the bits of an uninterrupted run:
stopped by a (simulated) SIGTERM at a step, which checkpoints there, and killed with SIGKILL, which
resumes from the last epoch's checkpoint. Each run exercises every random stream its config draws."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import resume_helper as helper

from dssl.training.preemption import Preempted

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(autouse=True)
def _restore():
    yield
    helper.restore()


@pytest.mark.parametrize("name, stop_at", [("finetune", 7), ("finetune_vit", 4), ("linear_probe_10pct", 9),
                                                  ("linear_probe_10pct_draws", 30)])
def test_a_run_stopped_at_a_step_resumes_to_the_same_bits(name, stop_at, tmp_path: Path):
    steps = helper.count_steps()
    uninterrupted = helper.run(name)
    total = len(steps)
    helper.stop_after(stop_at)
    with pytest.raises(Preempted, match="SIGTERM"):
        helper.run(name, tmp_path)
    assert (tmp_path / "checkpoint.pt").is_file()
    helper.restore()
    steps = helper.count_steps()
    resumed = helper.run(name, tmp_path)
    assert len(steps) == total - stop_at   # it went on from the step it stopped at
    assert resumed == uninterrupted


def test_a_checkpoint_of_other_inputs_is_ignored(tmp_path: Path):
    from dssl.evaluation.progress import Checkpoint

    Checkpoint(tmp_path, "another run").save({"lr_index": 1})
    assert Checkpoint(tmp_path, "fingerprint").load() is None
    assert helper.run("finetune", tmp_path) == helper.run("finetune")


def test_a_killed_fine_tuning_resumes_from_its_last_epoch(tmp_path: Path):
    steps = helper.count_steps()
    uninterrupted = helper.run("finetune")
    per_epoch = len(steps) // 6   # 2 lrs x 3 epochs; 87 fit images in batches of 16: 6 steps
    marker = tmp_path / "paused"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(helper.__file__).parent), *sys.path])}
    # step 13 is inside epoch 3 of the first lr: epochs 1 and 2 are checkpointed when it is killed
    process = subprocess.Popen([sys.executable, helper.__file__, "finetune", str(tmp_path / "ckpt"), "13", str(marker)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (tmp_path / "ckpt" / "checkpoint.pt").is_file()
    steps = helper.count_steps()
    assert helper.run("finetune", tmp_path / "ckpt") == uninterrupted
    assert per_epoch == 6 and len(steps) == 6 * per_epoch - 2 * per_epoch


def test_epoch_writes_wait_for_the_interval_but_a_stop_writes_at_once(tmp_path: Path):
    """With a long interval no epoch is written (the probe's 6 epochs take well under an hour), yet a stop
    request still checkpoints its step and the run resumes from there to the same bits."""
    from dssl.evaluation.progress import Checkpoint

    uninterrupted = helper.run("linear_probe_10pct")
    helper.run("linear_probe_10pct", tmp_path / "quiet", every_s=3600)
    assert not (tmp_path / "quiet" / "checkpoint.pt").exists()

    helper.stop_after(9)
    with pytest.raises(Preempted, match="SIGTERM"):
        helper.run("linear_probe_10pct", tmp_path / "stopped", every_s=3600)
    assert Checkpoint(tmp_path / "stopped", "fingerprint").load() is not None
    helper.restore()
    assert helper.run("linear_probe_10pct", tmp_path / "stopped", every_s=3600) == uninterrupted

"""A pretraining run told to stop (SIGTERM / SIGUSR1 through ``dssl.training.preemption``) stops after
the round under way, its checkpoint written, and the run started again ends with the same bits."""

from __future__ import annotations

import os
import signal

import fl_resume_helper as helper
import pytest
import torch

from dssl.pipeline.pretrain import stop_when_asked
from dssl.training import preemption

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(autouse=True)
def _handlers():
    previous = {signum: signal.getsignal(signum) for signum in preemption.SIGNALS}
    preemption.reset()
    yield
    preemption.reset()
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def test_a_signal_is_a_request_and_stops_at_the_next_safe_point():
    preemption.install()
    assert not preemption.requested()
    preemption.stop_if_requested("anywhere")   # nothing asked: goes on
    os.kill(os.getpid(), signal.SIGUSR1)
    assert preemption.requested()
    with pytest.raises(preemption.Preempted, match="stopped by SIGUSR1 after round 3; the checkpoint is written"):
        preemption.stop_if_requested("after round 3")


@pytest.mark.parametrize("kind", ["fl", "decl"])
def test_a_run_stopped_after_a_round_resumes_to_the_same_bits(kind, tmp_path):
    uninterrupted = helper.run(kind).final_state
    simulator = helper.build(kind, tmp_path)
    # the signal arrives during round 2's training; the round finishes, is checkpointed, then the run stops
    helper.after_steps(simulator, helper.STEPS_PER_ROUND[kind] + 1, lambda: os.kill(os.getpid(), signal.SIGTERM))
    preemption.install()
    with pytest.raises(preemption.Preempted, match="after round 2"):
        simulator.run(stop_when_asked)
    preemption.reset()
    resumed = helper.build(kind, tmp_path)
    result = resumed.run(stop_when_asked)
    assert result.resumed_rounds == 2
    assert all(torch.equal(result.final_state[k], v) for k, v in uninterrupted.items())

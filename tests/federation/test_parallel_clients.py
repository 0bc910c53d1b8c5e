"""Clients trained at once in worker processes give the same bits as clients trained one after another."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal

import pytest
import torch

from dssl.config.strategies import STRATEGY_SPECS
from dssl.federation.parallel import ClientTask, ClientWorkerError, check_worker_count, dumps, task_message
from dssl.federation.state import StackedStates

import fl_resume_helper as helper
from strategy_cases import CASES, TIMINGS, assert_same, build

pytestmark = pytest.mark.usefixtures("single_thread")


def test_every_strategy_is_covered():
    assert {case[0] for case in CASES} == set(STRATEGY_SPECS.names())


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[4]}-{i}" for i, c in enumerate(CASES)])
def test_two_workers_give_the_same_bits_as_one_process(case):
    serial_simulator = build(case)
    serial = serial_simulator.run()
    parallel_simulator = build(case, client_workers=2)
    parallel = parallel_simulator.run()
    assert_same(serial.final_state, parallel.final_state, "final_state")
    assert_same(serial.global_states, parallel.global_states, "global_states")
    assert serial.final_index == parallel.final_index
    assert_same(list(serial_simulator.local_states), list(parallel_simulator.local_states), "local_states")
    assert_same(serial_simulator.strategy.state_dict(), parallel_simulator.strategy.state_dict(), "strategy")
    for a, b in zip(serial.metrics, parallel.metrics):
        assert_same({k: v for k, v in a.items() if k not in TIMINGS}, {k: v for k, v in b.items() if k not in TIMINGS})
    assert serial.fingerprint == parallel.fingerprint  # worker count is not part of a run's identity
    assert not multiprocessing.active_children()  # the workers are gone after the run


@pytest.mark.parametrize("framework_case", [0, 1], ids=["fl", "decl"])
def test_a_client_draws_the_same_global_randomness_in_a_worker_as_in_series(framework_case):
    """Dropout and drop-path draw from torch's global RNG, which is seeded per client and round: a
    client's draws depend neither on the process that trains it nor on the clients trained before."""
    def with_global_draws(simulator):
        original = simulator.strategy.client_loss

        def client_loss(method, images, ctx):
            return {**original(method, images, ctx), "global_draw": torch.rand(())}

        simulator.strategy.client_loss = client_loss
        return simulator

    serial = with_global_draws(build(CASES[framework_case])).run()
    parallel = with_global_draws(build(CASES[framework_case], client_workers=2)).run()
    draws = [[m["global_draw"] for m in result.metrics] for result in (serial, parallel)]
    assert draws[0] == draws[1]
    assert len(set(draws[0])) == len(draws[0])  # a fresh draw every round


def fail_in_round(simulator, round_index: int, fail) -> None:
    """Make the run's client loss call ``fail()`` (which raises, or kills its process) in round ``round_index``."""
    original = simulator.strategy.client_loss

    def failing_loss(method, images, ctx):
        if ctx.round == round_index:
            fail()
        return original(method, images, ctx)

    simulator.strategy.client_loss = failing_loss


def raise_(error: BaseException):
    def fail(*_):
        raise error
    return fail


def test_a_parallel_run_stopped_by_a_failure_resumes_from_its_checkpoint_to_the_same_bits(tmp_path):
    uninterrupted = helper.run("fl")
    threads = torch.get_num_threads()
    interrupted = helper.build("fl", checkpoint_dir=tmp_path, client_workers=2)
    fail_in_round(interrupted, 2, raise_(FloatingPointError("stop here")))
    with pytest.raises(ClientWorkerError, match="round 3"):
        interrupted.run()
    resumed = helper.build("fl", checkpoint_dir=tmp_path, client_workers=2).run()
    assert resumed.resumed_rounds == 2 and torch.get_num_threads() == threads
    assert_same(uninterrupted.final_state, resumed.final_state)


def failing_client(simulator):
    fail_in_round(simulator, 1, raise_(FloatingPointError("loss exploded on purpose")))


def killed_worker(simulator):  # as the kernel's out-of-memory killer would
    fail_in_round(simulator, 1, lambda: os.kill(os.getpid(), signal.SIGKILL))


def unloadable_state(simulator):  # only the workers load the state in a run that does not resume
    simulator.strategy.load_state_dict = raise_(KeyError("state from another strategy"))


@pytest.mark.parametrize("sabotage, message", [
    (failing_client, r"(?s)client \d \(round 2\) failed in worker process \d+.*FloatingPointError: loss exploded"),
    (killed_worker, r"client \d \(round 2\): worker process \d+ exited with code -9"),
    (unloadable_state, r"(?s)round 1\) failed.*while loading the round's strategy state.*state from another"),
], ids=["failing-client", "killed-worker", "unloadable-state"])
def test_a_failure_in_a_worker_names_client_round_and_cause_and_every_worker_stops(sabotage, message):
    simulator = build(CASES[0], client_workers=2)
    sabotage(simulator)
    with pytest.raises(ClientWorkerError, match=message):
        simulator.run()
    assert not multiprocessing.active_children()


def test_worker_counts_the_simulator_cannot_run_are_refused_before_training():
    with pytest.raises(ValueError, match="integer >= 1"):
        check_worker_count(0, torch.device("cpu"))
    with pytest.raises(ValueError, match="integer >= 1"):
        build(CASES[0], client_workers=1.5)
    with pytest.raises(ValueError, match="on cuda:0: use client_workers=1"):
        check_worker_count(2, torch.device("cuda:0"))
    check_worker_count(1, torch.device("cuda:0"))  # one process may own the accelerator

    def in_daemon(queue):
        try:
            check_worker_count(2, torch.device("cpu"))
            queue.put("accepted")
        except ValueError as error:
            queue.put(str(error))

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=in_daemon, args=(queue,), daemon=True)
    process.start()
    message = queue.get(timeout=30)
    process.join()
    assert "DSSL_WORKERS=1" in message


def test_a_row_of_stacked_states_pickles_without_the_other_rows():
    states = StackedStates({"w": torch.zeros(1000)}, 50)
    row = states.row(3)
    assert len(dumps(row)) < len(pickle.dumps(row)) / 10
    assert torch.equal(pickle.loads(dumps(row))["w"], row["w"])
    # a DecL task starts from such a row: what a worker receives holds that row only
    task = ClientTask(3, 0, 0, [row])
    assert len(task_message(task, {})) < len(pickle.dumps(row)) / 10
    assert torch.equal(pickle.loads(task_message(task, {}))[1].global_states[0]["w"], row["w"])


@pytest.mark.parametrize("tensor", [
    torch.randn(3, 4), torch.tensor(2.5, dtype=torch.bfloat16), torch.randn(2, 3, dtype=torch.float16),
    torch.arange(12, dtype=torch.int64).reshape(3, 4).t(), torch.tensor([True, False, True]),
    torch.zeros(0, 5), torch.randint(0, 255, (4,), dtype=torch.uint8), torch.tensor(7, dtype=torch.int64),
], ids=["float32", "bfloat16-0d", "float16", "int64-transposed", "bool", "empty", "uint8", "int64-0d"])
def test_tensors_arrive_with_their_values_dtype_and_shape_and_own_their_memory(tensor):
    received = pickle.loads(dumps({"t": tensor, "rest": [1, "a"]}))
    assert received["rest"] == [1, "a"]
    got = received["t"]
    assert got.dtype == tensor.dtype and got.shape == tensor.shape and torch.equal(got, tensor)
    if got.numel():  # writable, and not the sender's memory
        sent = tensor.clone()
        got.copy_(~got if got.dtype == torch.bool else got + 1)
        assert not torch.equal(got, sent) and torch.equal(tensor, sent)


def test_a_tensor_that_needs_gradients_still_pickles():
    weight = torch.nn.Parameter(torch.ones(3))
    assert torch.equal(pickle.loads(dumps(weight)), weight)

"""The clients of a round trained at once, in forked worker processes with one torch thread each.

``ClientWorkers(train_task, strategy, count)`` forks ``count`` processes, each holding a copy of the
simulator that ``train_task`` belongs to (its model, optimizer, strategy and the clients' data: nothing
is pickled at start). Per round, the server sends every worker the strategy's checkpointed state and
the round's global models once, then hands out client tasks to whichever worker is free; a worker runs
``train_task`` (the simulator's own client step) on the task and the client's ``local_state`` and
returns the ``ClientOutcome``: the upload, the local result and the client's new ``local_state``.
Results come back in task order, so aggregation sums in the same order as in series.

Why a client trains the same in a worker: its training depends only on its task (client, round,
participation, start models), its local_state and the strategy's checkpointed state (the strategy
contract, ``strategies.base``); every random stream is seeded per (seed, round, client). With one
thread in the server and in the workers the final weights are the same bits as in series (tested).

Why one thread per worker: CPU kernels sum in another order with another thread count, and an OpenMP
pool started in the server before the fork hangs a child that asks for more than one thread
(measured with torch 2.14's CPU build). Why fork: the children share the server's data and model
without pickling them, and start in milliseconds. Why the CPU only: a forked child cannot use a CUDA
context its parent created, and on one accelerator a single client keeps the device busy.

A worker ends with the process that forked it, however that ends (kill -9 included: ``dssl.orphans``), so
no orphan trains on into a dead stage's temporary output.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch

from dssl.federation.state import StateDict
from dssl.orphans import die_with_parent

if TYPE_CHECKING:
    from dssl.federation.local import LocalResult
    from dssl.federation.strategies.base import Strategy, Upload

THREADS_PER_WORKER = 1


@dataclass
class ClientTask:
    """One client's training in a round. ``global_states``: the models it may start from; None means
    the round's (FL: the server's global models, sent to each worker once per round)."""

    client_id: int
    round_index: int
    participation: int
    global_states: Sequence[StateDict] | None = None


@dataclass
class ClientOutcome:
    upload: Upload
    result: LocalResult
    local_state: dict
    train_time_s: float


# A client's training as the simulator runs it: (task, the round's global models, the client's local_state).
TrainTask = Callable[[ClientTask, Sequence[StateDict], dict], ClientOutcome]


class ClientWorkerError(RuntimeError):
    """A client's training failed in a worker process (the message holds the worker's traceback)."""


def check_worker_count(count: int, device: torch.device) -> None:
    """Refuse a worker count the simulator cannot run, before any training."""
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"client_workers must be an integer >= 1, got {count!r}")
    if count > 1 and device.type != "cpu":
        raise ValueError(f"client_workers={count} trains clients in forked CPU processes, but the model is on "
                         f"{device}: use client_workers=1 on an accelerator")
    if count > 1 and multiprocessing.current_process().daemon:
        raise ValueError(f"client_workers={count} forks worker processes, which a daemonic process (a pool "
                         "worker) may not do: train the seeds one after another (DSSL_WORKERS=1)")


def _tensor_from_bytes(dtype: str, shape: tuple[int, ...], data: bytearray) -> torch.Tensor:
    if not data:  # torch.frombuffer refuses an empty buffer
        return torch.empty(shape, dtype=getattr(torch, dtype))
    return torch.frombuffer(data, dtype=torch.uint8).view(getattr(torch, dtype)).reshape(shape)


class _TensorPickler(pickle.Pickler):
    """Pickles a CPU tensor as the bytes of its own elements. Plain pickling goes through torch's
    storage serialization, ``torch.save`` per storage (measured on SimSiam + cnn_small's 42-tensor,
    0.6 MB state dict: 3 ms to pickle and 3 ms to unpickle, against 0.5 and 0.3 ms here), and sends the
    whole storage a view points into (a row of DecL's stacked states would carry every client's). A
    received tensor owns its memory: views of one storage arrive as separate tensors."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is torch.Tensor and obj.device.type == "cpu" and obj.layout == torch.strided \
                and not obj.is_quantized and not obj.requires_grad:
            flat = obj.resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8)
            dtype = str(obj.dtype).removeprefix("torch.")
            return _tensor_from_bytes, (dtype, tuple(obj.shape), bytearray(flat.numpy()))
        return NotImplemented


def dumps(message: Any) -> bytes:
    """``message`` pickled for a pipe, its tensors as their own bytes (``_TensorPickler``)."""
    buffer = io.BytesIO()
    _TensorPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(message)
    return buffer.getvalue()


def task_message(task: ClientTask, local_state: dict) -> bytes:
    """A task as a worker receives it, with its start models and the client's local state."""
    return dumps(("task", task, local_state))


def _send(connection: Connection, message: Any) -> None:
    connection.send_bytes(dumps(message))


def _receive(connection: Connection) -> Any:
    return pickle.loads(connection.recv_bytes())


def _serve(train_task: TrainTask, strategy: Strategy, connection: Connection) -> None:
    """A worker's loop: round payloads set the strategy state and global models; tasks are trained."""
    torch.set_num_threads(THREADS_PER_WORKER)
    round_states: Sequence[StateDict] = []
    round_error = ""  # a failure while loading the round's state, reported with the round's first task
    while True:
        try:
            kind, *body = _receive(connection)
        except EOFError:  # the server is gone
            return
        if kind == "stop":
            return
        if kind == "round":
            try:
                strategy_state, round_states = body
                strategy.load_state_dict(strategy_state)
                round_error = ""
            except BaseException:  # noqa: BLE001
                round_error = "while loading the round's strategy state:\n" + traceback.format_exc()
            continue
        if round_error:
            _send(connection, ("error", round_error))
            continue
        try:
            task, local_state = body
            outcome = train_task(task, round_states, local_state)
            _send(connection, ("done", outcome))
        except BaseException:  # noqa: BLE001  (reported to the server, which raises it)
            _send(connection, ("error", traceback.format_exc()))


def _worker_main(train_task: TrainTask, strategy: Strategy, connection: Connection, server_end: Connection,
                 server: int) -> None:
    die_with_parent(server)
    server_end.close()
    _serve(train_task, strategy, connection)


class ClientWorkers:
    """``count`` forked processes training the clients of each round with ``train_task``; ``strategy``
    is the one ``train_task`` uses (its state goes to the workers each round). Use as a context manager.
    The simulator checks ``count`` (``check_worker_count``) when it is built, before any training."""

    def __init__(self, train_task: TrainTask, strategy: Strategy, count: int):
        context = multiprocessing.get_context("fork")
        self.connections: list[Connection] = []
        self.processes: list[multiprocessing.process.BaseProcess] = []
        for _ in range(count):
            server_end, worker_end = context.Pipe()
            process = context.Process(target=_worker_main,
                                      args=(train_task, strategy, worker_end, server_end, os.getpid()),
                                      name="dssl-client-worker", daemon=True)
            process.start()
            worker_end.close()
            self.connections.append(server_end)
            self.processes.append(process)
        self.strategy = strategy

    def __enter__(self) -> ClientWorkers:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(kill=exc_type is not None)

    def train(self, tasks: Sequence[ClientTask], round_states: Sequence[StateDict], local_states: Sequence[dict],
              deliver: Callable[[int, ClientOutcome], None]) -> None:
        """Train ``tasks`` on the workers, each client from ``local_states[client_id]``;
        ``deliver(position, outcome)`` is called in task order as the outcomes arrive (one that finishes
        early waits for those before it)."""
        payload = dumps(("round", self.strategy.state_dict(), list(round_states)))
        for connection in self.connections:
            connection.send_bytes(payload)
        pending = list(enumerate(tasks))
        running: dict[Connection, tuple[int, ClientTask]] = {}
        finished: dict[int, ClientOutcome] = {}
        delivered = 0
        idle = list(self.connections)
        while pending or running:
            while pending and idle:
                position, task = pending.pop(0)
                connection = idle.pop(0)
                connection.send_bytes(task_message(task, local_states[task.client_id]))
                running[connection] = (position, task)
            for connection in wait(list(running)):
                position, task = running.pop(connection)
                finished[position] = self._outcome(connection, task)
                idle.append(connection)
            while delivered in finished:
                deliver(delivered, finished.pop(delivered))
                delivered += 1

    def _outcome(self, connection: Connection, task: ClientTask) -> ClientOutcome:
        where = f"client {task.client_id} (round {task.round_index + 1})"
        process = self.processes[self.connections.index(connection)]
        try:
            kind, body = _receive(connection)
        except EOFError:
            process.join(timeout=5)
            raise ClientWorkerError(f"{where}: worker process {process.pid} exited with code {process.exitcode} "
                                    "(killed for memory? fewer client_workers use less)") from None
        if kind == "error":
            raise ClientWorkerError(f"{where} failed in worker process {process.pid}:\n{body}")
        return body

    def close(self, kill: bool = False) -> None:
        """Stop the workers; ``kill`` (after an error) does not wait for the tasks they are running."""
        for connection, process in zip(self.connections, self.processes):
            if kill and process.is_alive():
                process.kill()
            elif process.is_alive():
                try:
                    _send(connection, ("stop",))
                except OSError:
                    pass
            connection.close()
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()


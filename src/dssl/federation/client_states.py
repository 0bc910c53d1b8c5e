"""Every client's local state off the training device, and the checkpoint files that hold it.

What a client carries from one round to its next lives in its ``local_state`` dict (``strategies.base``):
FedU's and FedEMA's whole previous model (BYOL with ResNet-18: 230 MiB per client), BYOL's EMA target,
MoCo's queue and key networks, Orchestra's memory, FeatARC's last model, a divergence. ``ClientStates``
keeps those dicts for all clients away from the accelerator:

- ``host`` (default): in host memory, as CPU tensors;
- ``disk``: in one file per client, read back only for the client that trains (for runs whose clients'
  states do not fit in memory: 100 FedEMA clients hold 23 GiB).

A client's state goes to the device for the round it trains (``fetch``) and back to the host after it
(``put``). A copy between devices keeps every value, so where the states live changes no bit of training.

Checkpoints write only what changed: each client's state is a file of its own,
``clients/client-<c>.round-<r>.<run>.pt`` (r: the round that produced it; run: the start of the run's
fingerprint), written once, after the round that changed it, and never rewritten; ``checkpoint.pt`` names
every client's current file and its size (``client_files``), checked at resume. Because a new state is a
new file, a run killed at any moment leaves the last ``checkpoint.pt`` and every file it names intact.
Files no checkpoint names any more are deleted once the next checkpoint is in place (and at resume). With
``disk`` storage the files a round writes are the storage itself, so a checkpoint adds nothing to them.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import torch

from dssl.artifacts import ArtifactError, require_file
from dssl.federation.checkpoint import client_file_recovery, load_client_file, save_client_file

STORAGES = ("host", "disk")
CLIENT_FOLDER = "clients"
HOST = torch.device("cpu")


def check_storage(storage: str) -> None:
    if storage not in STORAGES:
        raise ValueError(f"client state storage must be one of {', '.join(STORAGES)}, got {storage!r} "
                         "(host: the clients' states in memory; disk: in one file per client)")


def to_device(value: Any, device: torch.device | str) -> Any:
    """``value`` (tensors in dicts, lists and tuples) with every tensor on ``device`` (itself if there)."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {key: to_device(item, device) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(item, device) for item in value)
    return value


def client_file_name(client: int, round_index: int, run: str) -> str:
    return f"client-{client}.round-{round_index}.{run[:12]}.pt"


@dataclass
class _Entry:
    """One client's state: in memory (``state``), in a file (``file``), or both once written."""

    state: dict | None = None
    file: str | None = None
    round: int = 0          # the round that produced the state
    size: int = 0           # the file's bytes


class ClientStates(Sequence[dict]):
    """The local states of ``num_clients`` clients, kept in host memory or on disk (``storage``).

    ``folder``: where client files go: the run's checkpoint folder (its ``clients/`` sub-folder holds
    them), or None (no checkpoints; ``disk`` storage then uses a temporary folder, removed with this
    object). ``run``: the run's fingerprint, part of every file name, so that files of two
    configurations never share a name. ``states[c]`` is client c's state as host tensors ({} before it
    ever trained): with ``disk`` storage a fresh copy read from its file, so change it through ``put``.
    """

    def __init__(self, num_clients: int, storage: str = "host", folder: Path | str | None = None,
                 run: str = "run"):
        check_storage(storage)
        self.storage = storage
        self.run = run
        self._entries = [_Entry() for _ in range(num_clients)]
        self.checkpoint_folder = Path(folder) / CLIENT_FOLDER if folder is not None else None
        self._committed: set[str] = set()  # the files the last checkpoint names
        self._unsaved_bytes = 0            # disk storage: bytes written since the last checkpoint
        self._temporary: Path | None = None

    # -- access -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, client: int) -> dict:  # type: ignore[override]
        entry = self._entries[client]
        if entry.state is not None:
            return entry.state
        if entry.file is None:
            return {}
        state = load_client_file(self._folder() / entry.file)
        if self.storage == "host":
            entry.state = state
        return state

    def __iter__(self) -> Iterator[dict]:
        return (self[client] for client in range(len(self)))

    def fetch(self, client: int, device: torch.device | str) -> dict:
        """Client ``client``'s state with its tensors on ``device``, for the round it trains."""
        return to_device(self[client], device)

    def put(self, client: int, state: Mapping[str, Any], round_index: int) -> None:
        """The state client ``client`` ended round ``round_index`` with, moved to the host (or its file)."""
        entry = self._entries[client]
        superseded = entry.file
        host_state = to_device(dict(state), HOST)
        self._entries[client] = entry = _Entry(host_state, None, round_index)
        if self.storage == "disk" and host_state:
            entry.file = client_file_name(client, round_index, self.run)
            entry.size = save_client_file(self._folder() / entry.file, host_state)
            self._unsaved_bytes += entry.size
            entry.state = None
        if superseded is not None and superseded != entry.file and superseded not in self._committed:
            (self._folder() / superseded).unlink(missing_ok=True)  # never named by a checkpoint

    # -- checkpoints ----------------------------------------------------------------------------------

    def write_changed(self) -> int:
        """Write the file of every client whose state changed since the last checkpoint; the bytes
        written for this checkpoint (with ``disk`` storage: those its rounds already wrote)."""
        written, self._unsaved_bytes = self._unsaved_bytes, 0
        for client, entry in enumerate(self._entries):
            if entry.file is None and entry.state:
                entry.file = client_file_name(client, entry.round, self.run)
                entry.size = save_client_file(self._folder() / entry.file, entry.state)
                written += entry.size
        return written

    def files(self) -> list[dict | None]:
        """Every client's current file and its size (None: no state), for ``checkpoint.pt``."""
        return [{"file": e.file, "bytes": e.size} if e.file is not None else None for e in self._entries]

    def commit(self) -> None:
        """The checkpoint naming ``files()`` is in place: delete the client files it does not name."""
        self._committed = {entry.file for entry in self._entries if entry.file is not None}
        self._delete_unnamed()

    def restore(self, files: Sequence[dict | None]) -> None:
        """Adopt a checkpoint's ``client_files``; states are read from them when first needed.

        A named file that is missing or of another size is an ``ArtifactError`` here, before any
        training."""
        if len(files) != len(self._entries):
            raise ValueError(f"checkpoint names files for {len(files)} clients, this run has {len(self._entries)}")
        for named in files:
            if named is not None:
                path = self._folder() / named["file"]
                recovery = client_file_recovery(path)
                size = require_file(path, recovery).stat().st_size
                if size != named["bytes"]:
                    raise ArtifactError(path, f"has {size} bytes, the checkpoint wrote {named['bytes']}; "
                                              "truncated or replaced?", recovery=recovery)
        self._entries = [_Entry(None, n["file"], size=n["bytes"]) if n else _Entry({}) for n in files]
        self.commit()

    def _delete_unnamed(self) -> None:
        folder = self.checkpoint_folder
        if folder is None or not folder.is_dir():
            return
        for path in folder.glob("client-*.pt"):
            if path.name not in self._committed:
                path.unlink(missing_ok=True)

    def _folder(self) -> Path:
        if self.checkpoint_folder is not None:
            return self.checkpoint_folder
        if self._temporary is None:
            self._temporary = Path(tempfile.mkdtemp(prefix="dssl-client-states-"))
            weakref.finalize(self, shutil.rmtree, self._temporary, True)
        return self._temporary

"""What a process killed at any moment (kill -9 included) leaves behind: its workers and its temporary files.

Nothing runs in a process that receives SIGKILL, so neither can be cleaned up by the process itself:

- Its forked workers (a stage's seed workers, ``pipeline.workers``; a round's client workers,
  ``federation.parallel``) would live on as orphans: they train on, write into the temporary output of
  their dead stage, then block forever on a pipe nobody reads. So each worker, right after the fork, asks
  the kernel to kill it when its parent ends (``die_with_parent``: Linux's parent-death signal; elsewhere a
  thread of the worker watches its parent's pid).
- Its temporary files and folders (``atomic_dir``'s ``.<name>.tmp-<pid>`` and ``.<name>.old-<pid>``,
  ``atomic_file``'s ``.<name>.tmp-<pid><suffix>``, a checkpoint's ``.<name>.<pid>.tmp``) stay where they
  were. A stage removes those of dead writers from the folders it writes, when it starts writing there
  (``remove_dead_temporaries``); a live writer's (another run of the same output) is left alone.

Standard library only: the seed workers' module imports it before torch is loaded.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1        # linux/prctl.h
PARENT_POLL_S = 1.0         # how often a worker without a parent-death signal looks at its parent
START_TOLERANCE_S = 2.0     # /proc's boot time has whole seconds; file systems round modification times

# .<name>.tmp-<pid>[<suffix>], .<name>.old-<pid> (pipeline.common) and .<name>.<pid>.tmp (checkpoints)
_TEMPORARY = re.compile(r"^\.(?P<name>.+?)(?:\.(?:tmp|old)-(?P<pid>\d+)(?P<suffix>\.[^.]*)?|\.(?P<pid2>\d+)\.tmp)$")


def die_with_parent(parent: int) -> None:
    """Make this process (a worker just forked from ``parent``) end with SIGKILL as soon as ``parent``
    ends, however it ends.

    The parent-death signal is sent when the thread that forked the worker ends, so workers must be forked
    by a thread that outlives them (the stage's main thread). The parent may have ended between the fork
    and this call, when no signal would come: then the worker ends at once."""
    if _set_parent_death_signal():
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return
    threading.Thread(target=_watch_parent, args=(parent,), name="dssl-parent-watch", daemon=True).start()


def _set_parent_death_signal() -> bool:
    """prctl(PR_SET_PDEATHSIG, SIGKILL) on Linux; False where it is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGKILL)


def temporary_pid(path: Path, name: str | None = None) -> int | None:
    """The pid of the process writing ``path`` if its name is a temporary one (of target ``name``, when
    given), else None."""
    match = _TEMPORARY.match(Path(path).name)
    if match is None or (name is not None and match["name"] != name):
        return None
    return int(match["pid"] or match["pid2"])


def writer_alive(pid: int, modified: float) -> bool:
    """Whether process ``pid`` may still be writing a temporary last modified at ``modified`` (epoch
    seconds): it exists and did not start after that (a pid reused since, e.g. by a restarted container, is
    another process)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass   # it exists, under another user
    started = process_start(pid)
    return started is None or started <= modified + START_TOLERANCE_S


def process_start(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds), from /proc; None where that cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")   # field 22 of proc(5): starttime
    except (OSError, IndexError, StopIteration, ValueError):
        return None


def remove_dead_temporaries(folder: Path, name: str | None = None, recursive: bool = False) -> list[Path]:
    """Remove the temporary files and folders in ``folder`` (and below it, ``recursive``) whose writer is
    dead; ``name``: only those of that target. Returns what was removed."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    candidates = folder.rglob(".*") if recursive else folder.glob(".*")
    removed = []
    for path in sorted(candidates):
        pid = temporary_pid(path, name)
        if pid is None or not _remove_if_dead(path, pid):
            continue
        removed.append(path)
    if removed:
        logger.info("removed %d temporaries of killed runs: %s", len(removed), ", ".join(map(str, removed)))
    return removed


def _remove_if_dead(path: Path, pid: int) -> bool:
    try:
        modified = path.lstat().st_mtime
    except FileNotFoundError:
        return False   # removed already, with the folder above it
    if writer_alive(pid, modified):
        return False
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
    return True

"""Real services for the cluster tests: a single-node SLURM (munge, slurmctld, slurmd) on this machine.

Debian's packages (`.ci/install-services` installs them; the fixture runs it when a command is
missing). Every daemon's state, log, pid file and socket lives in a scratch folder and the daemons use
free ports, so nothing collides with another service. Only the configuration must sit where every
SLURM command looks for it, /etc/slurm/slurm.conf: Snakemake's SLURM job step drops SLURM_* variables
(SLURM_CONF among them) before it calls `srun`. The file is written only when absent, guarded by a
lock (one local SLURM per machine at a time), and removed when the daemons stop.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INSTALL_SCRIPT = REPO / ".ci" / "install-services"
SLURM_CONF = Path("/etc/slurm/slurm.conf")
MARKER = "# written by dssl's tests/services.py"
COMMANDS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
PARTITION = "local"  # the partition profiles/slurm-local submits to
CRED_EXPIRE_S = 20


def missing_commands(commands=COMMANDS) -> list[str]:
    return [c for c in commands if shutil.which(c) is None and not Path("/usr/sbin", c).exists()]


def ensure_installed(commands=COMMANDS) -> str | None:
    """None when every command is present (installing them as root if needed), else why not."""
    if not missing_commands(commands):
        return None
    if os.geteuid() != 0:
        return f"missing {', '.join(missing_commands(commands))} and not root: run .ci/install-services as root"
    result = subprocess.run([str(INSTALL_SCRIPT)], capture_output=True, text=True)
    still = missing_commands(commands)
    if still:
        return (f"missing {', '.join(still)}; .ci/install-services could not install them "
                f"(exit {result.returncode}): {result.stderr.strip()[-500:]}")
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _sbin(program: str) -> str:
    return shutil.which(program) or f"/usr/sbin/{program}"


def _wait_for(check, what: str, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    tail = log.read_text()[-3000:] if log.exists() else "(no log)"
    raise RuntimeError(f"{what} did not come up within {timeout:.0f} s; {log}:\n{tail}")


class LocalSlurm:
    """munged + slurmctld + slurmd for one node (this machine), without accounting storage.

    Job states come from `squeue` (slurmctld keeps finished jobs for MinJobAge), which is what
    profiles/slurm-local asks the Snakemake executor to use: no slurmdbd or database is needed.
    """

    def __init__(self) -> None:
        # A short path under /tmp: munge's socket path must be short and every parent searchable.
        self.folder = Path(tempfile.mkdtemp(prefix="dssl-slurm-"))
        self.folder.chmod(0o755)
        self.host = socket.gethostname().split(".")[0]
        self._lock = None
        self._wrote_conf = False

    def _config(self) -> str:
        f = self.folder
        cpus = os.cpu_count() or 1
        memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        return f"""{MARKER} ({f}); removed when its daemons stop
ClusterName=dssl-local
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: also how long SLURM holds a requeued job back (default 120 s); short, for the preemption test
AuthInfo=socket={f}/munge/munge.socket,cred_expire={CRED_EXPIRE_S}
StateSaveLocation={f}/state
SlurmdSpoolDir={f}/spool
SlurmctldPidFile={f}/slurmctld.pid
SlurmdPidFile={f}/slurmd.pid
SlurmctldLogFile={f}/log/slurmctld.log
SlurmdLogFile={f}/log/slurmd.log
# No systemd or cgroup control in a container: track job processes through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# Start a pending job within a second of its becoming eligible (defaults: every 30 s by backfill, 60 s by
# the main loop): a requeued job waits out its hold, then would idle up to 30 s more.
SchedulerParameters=bf_interval=1,sched_interval=1
ReturnToService=2
# squeue answers for a finished job while slurmctld keeps it: Snakemake reads job states from it.
MinJobAge=3600
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={int(memory_mb * 0.8)} State=UNKNOWN
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""

    def start(self) -> None:
        SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(SLURM_CONF.parent / ".dssl-tests.lock", "w")
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # one local SLURM per machine: wait for the other
        if SLURM_CONF.exists() and MARKER not in SLURM_CONF.read_text():
            self._release()
            raise FileExistsError(f"{SLURM_CONF} belongs to another SLURM installation; not overwriting it")
        for sub in ("munge", "state", "spool", "log"):
            (self.folder / sub).mkdir()
        key = self.folder / "munge" / "munge.key"
        subprocess.run([_sbin("mungekey"), "--create", "--keyfile", str(key)], check=True)
        subprocess.run([_sbin("munged"), f"--key-file={key}", f"--socket={self.folder}/munge/munge.socket",
                        f"--pid-file={self.folder}/munge/munged.pid", f"--log-file={self.folder}/log/munged.log",
                        f"--seed-file={self.folder}/munge/munged.seed"], check=True)
        SLURM_CONF.write_text(self._config())
        self._wrote_conf = True
        subprocess.run([_sbin("slurmctld")], check=True)
        subprocess.run([_sbin("slurmd")], check=True)
        _wait_for(self._node_idle, "the SLURM node", self.folder / "log" / "slurmd.log")

    def _node_idle(self) -> bool:
        result = subprocess.run(["sinfo", "--noheader", "--format=%t"], capture_output=True, text=True)
        return result.returncode == 0 and result.stdout.strip() == "idle"

    def job_field(self, job: str, field: str) -> str:
        """One field of `scontrol show job` (e.g. ``Restarts``, ``JobState``)."""
        out = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True, check=True).stdout
        return next(item.split("=", 1)[1] for item in out.split() if item.startswith(f"{field}="))

    def jobs(self) -> list[tuple[str, str, str]]:
        """(job id, job name, state) of every job slurmctld knows, finished ones included."""
        out = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%j|%T"],
                             capture_output=True, text=True, check=True).stdout
        return [tuple(line.split("|")) for line in out.splitlines() if line.strip()]

    def stop(self) -> None:
        for name in ("slurmd.pid", "slurmctld.pid", "munge/munged.pid"):
            pid_file = self.folder / name
            if pid_file.exists():
                try:
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
                except (ProcessLookupError, ValueError):
                    pass
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any((self.folder / n).exists()
                                                  for n in ("slurmd.pid", "slurmctld.pid")):
            time.sleep(0.2)
        self._release()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _release(self) -> None:
        if self._wrote_conf and SLURM_CONF.exists() and MARKER in SLURM_CONF.read_text():
            SLURM_CONF.unlink()
        self._wrote_conf = False
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def log_tail(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((self.folder / "log").glob("*.log")))

"""A stage stopped by its scheduler gets itself run again.

A training or evaluation stage told to stop (SIGUSR1 / SIGTERM, ``dssl.training.preemption``) goes on to
its next safe point, writes its checkpoint and raises ``Preempted``; the ``dssl`` command then calls
``requeue_slurm_job`` and exits with status 75 (EX_TEMPFAIL, "try again").

Under SLURM (profiles/slurm: ``--signal=USR1@<seconds>`` ahead of each training and evaluation job's
time limit, and ``--requeue``), the stage asks SLURM to requeue its own job (``scontrol requeue``): the
job keeps its id, so Snakemake simply sees it pending again, and when it starts again the stage resumes
from its checkpoint and ends with the same bits. SLURM holds a requeued job back for its credential
lifetime (``cred_expire``, 120 s by default) before it may start. Where SLURM refuses (not a batch job,
requeueing disabled at the site), the job ends with status 75 and Snakemake resubmits it while the
profile's ``retries`` last; outside SLURM, running the same command again resumes the stage.
"""

from __future__ import annotations

import os
import subprocess
from typing import Mapping

SCONTROL_TIMEOUT_S = 60


def requeue_slurm_job(environ: Mapping[str, str] = os.environ) -> str:
    """Ask SLURM to requeue the job this process runs in; returns what happened, for the stage's log."""
    job = environ.get("SLURM_JOB_ID")
    if not job:
        return "not a SLURM job: run the same command again to resume"
    try:
        done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True,
                              timeout=SCONTROL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        problem = str(err)
    else:
        if done.returncode == 0:
            return f"SLURM job {job} requeued: it resumes from the checkpoint when it starts again"
        problem = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
    return (f"SLURM did not requeue job {job} ({problem}); the job ends with status 75 and Snakemake "
            "resubmits it while the profile's retries last (or run the same command again)")

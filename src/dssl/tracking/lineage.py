"""Lineage facts recorded with every stage run: code version, engine, hardware, params hash, input hashes."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path


def git_state(root: Path) -> dict[str, str]:
    """Commit and dirty flag of the project's git checkout ('unknown' outside git)."""
    def run(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return ""

    commit = run("rev-parse", "HEAD").strip() or "unknown"
    # Only tracked sources count as dirty: stage outputs are ignored or DVC-tracked.
    dirty = bool(run("status", "--porcelain", "--untracked-files=no").strip())
    return {"git_commit": commit, "git_dirty": str(dirty).lower()}


def engine() -> dict[str, str]:
    """Which workflow engine runs the stage (DVC exports DVC_STAGE; the Snakefile sets DSSL_ENGINE)."""
    if os.environ.get("DVC_STAGE"):
        return {"engine": "dvc", "dvc_stage": os.environ["DVC_STAGE"]}
    return {"engine": os.environ.get("DSSL_ENGINE", "manual")}


def cpu_model() -> str:
    """The processor's model name (/proc/cpuinfo on Linux), else what the platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


# The environment variables that pin the CPU kernels torch, oneDNN and MKL choose (read when each library
# loads): a run pinned to AVX2 on an AVX512 CPU gives an AVX2 CPU's bits (docs/reproducibility.md), so the
# pins a stage ran under are part of its hardware, recorded by the stage itself.
KERNEL_PINS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")
PINNED = "kernels pinned: "


def kernel_pins() -> dict[str, str]:
    """The kernel pins set in this process's environment (name -> value)."""
    return {name: os.environ[name] for name in KERNEL_PINS if os.environ.get(name)}


def hardware() -> dict[str, str]:
    """What the numbers' bits depend on besides code, params and data: the CPU and the instruction set
    torch's kernels use (MKL, oneDNN and torch choose their kernels per CPU, by instruction set and by
    vendor: an Intel Xeon and an AMD EPYC, both AVX512, train the same seed to other weights), the kernel
    pins, torch's version and the accelerator. Torch facts only when torch is loaded."""
    pins = kernel_pins()
    facts = {"hardware.cpu": cpu_model(),
             "hardware.kernel_pins": " ".join(f"{k}={v}" for k, v in pins.items()) or "none"}
    torch = sys.modules.get("torch")
    if torch is not None:
        facts["hardware.cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())
        facts["hardware.torch"] = str(torch.__version__)
        facts["hardware.accelerator"] = torch.cuda.get_device_name() if torch.cuda.is_initialized() else "none"
    return facts


def hardware_label(facts: dict[str, str] | None = None) -> str:
    """One line for result files and reports: ``<cpu> (<capability>), torch <version>[, <accelerator>]``,
    then ``, kernels pinned: NAME=value ...`` for a pinned run (``label_pins`` reads them back)."""
    facts = hardware() if facts is None else facts
    label = facts["hardware.cpu"]
    if "hardware.cpu_capability" in facts:
        label += f" ({facts['hardware.cpu_capability']}), torch {facts['hardware.torch']}"
        if facts["hardware.accelerator"] != "none":
            label += f", {facts['hardware.accelerator']}"
    if facts.get("hardware.kernel_pins", "none") != "none":
        label += f", {PINNED}{facts['hardware.kernel_pins']}"
    return label


def label_pins(label: str) -> dict[str, str]:
    """The kernel pins a ``hardware_label`` names (empty: none)."""
    _, found, pins = str(label).partition(PINNED)
    return dict(pin.split("=", 1) for pin in pins.split()) if found else {}


def params_hash(params_read: dict) -> str:
    """sha256 over the canonical JSON of exactly the params a stage read."""
    canonical = json.dumps(params_read, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def file_md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def content_hash(path: Path) -> str:
    """md5 of a file, or of the sorted (relative path, md5) list of a folder's files."""
    path = Path(path)
    if path.is_file():
        return file_md5(path)
    entries = sorted(
        f"{p.relative_to(path).as_posix()}:{file_md5(p)}" for p in path.rglob("*") if p.is_file()
    )
    return hashlib.md5("\n".join(entries).encode()).hexdigest()

"""The GPU throughput a plan converts FLOPs into hours with: measured, or an assumed share of peak.

Measured: ``benchmarks/gpu_round.py`` writes one row per (GPU, method, backbone, step option, image size,
batch) to ``benchmarks/results/gpu_round.json``: images/s of a paper-scale FL round and the FLOPs per
image of that method's training step (``costs``), so their product is the FLOP/s the GPU sustained on
that backbone. A plan applies it to every stage of the same backbone, image size and step option
(training and evaluation alike: the FLOP rate of one backbone is taken to carry over between methods).

Assumed, where no row matches: ``share`` x the GPU's dense peak for the step's precision (fp32: the
non-tensor-core FP32 peak; bf16: the dense BF16 tensor-core peak), printed with the assumption.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path("benchmarks/results/gpu_round.json")
RESULT_KEYS = ("device_name", "method", "backbone", "option", "size", "batch")

# Dense peak TFLOP/s per precision (vendor datasheets, SXM parts; no sparsity).
GPU_PEAKS: dict[str, dict[str, float]] = {
    "a100": {"name": "NVIDIA A100 SXM", "fp32": 19.5, "bf16": 312.0},
    "h100": {"name": "NVIDIA H100 SXM", "fp32": 67.0, "bf16": 989.0},
    "h200": {"name": "NVIDIA H200 SXM", "fp32": 67.0, "bf16": 989.0},
}
DEFAULT_GPU = "a100"
DEFAULT_SHARE = 0.3


def step_option(precision: str = "fp32", channels_last: bool = False, compile: bool = False) -> str:
    """gpu_round's option name of a step's settings: ``plain`` or flags joined by ``+``."""
    flags = [flag for flag, on in (("bf16", precision == "bf16"), ("channels_last", channels_last),
                                   ("compile", compile)) if on]
    return "+".join(flags) or "plain"


@dataclass(frozen=True)
class Rate:
    flops_per_s: float
    source: str        # how it was obtained, for the printed plan
    measured: bool


class Throughput:
    """FLOP/s per (backbone, image size, step option): the newest matching gpu_round row on a GPU
    (optionally only GPUs whose name contains ``gpu_name``), else ``share`` of ``gpu``'s peak."""

    def __init__(self, rows: list[dict], gpu: str = DEFAULT_GPU, share: float = DEFAULT_SHARE,
                 gpu_name: str | None = None):
        if gpu not in GPU_PEAKS:
            raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(GPU_PEAKS)} (or give --peak-tflops)")
        if not 0 < share <= 1:
            raise ValueError(f"the assumed share of peak must be in (0, 1], got {share}")
        self.rows = [r for r in rows if str(r.get("device", "")).startswith("cuda")
                     and (gpu_name is None or gpu_name.lower() in str(r.get("device_name", "")).lower())]
        self.gpu, self.share = gpu, share

    @classmethod
    def from_file(cls, path: Path, **options: Any) -> Throughput:
        return cls(read_results(path), **options)

    def rate(self, backbone: str, image_size: int, option: str) -> Rate:
        matches = [r for r in self.rows if r["backbone"] == backbone and r["size"] == image_size
                   and r["option"] == option and r.get("flops_per_image") and r.get("images_per_s")]
        if matches:
            row = max(matches, key=lambda r: r.get("date", ""))
            flops = row["images_per_s"] * row["flops_per_image"]
            return Rate(flops, f"measured by benchmarks/gpu_round.py on {row['device_name']} ({row.get('date', '?')}): "
                               f"{row['images_per_s']:,.0f} images/s of {row['method']} at batch {row['batch']} = "
                               f"{flops / 1e12:.1f} TFLOP/s", True)
        precision = "bf16" if "bf16" in option else "fp32"
        peak = GPU_PEAKS[self.gpu]
        flops = self.share * peak[precision] * 1e12
        return Rate(flops, f"assumed {self.share:.0%} of the {peak['name']}'s {peak[precision]:g} TFLOP/s {precision} "
                           f"peak = {flops / 1e12:.2f} TFLOP/s (no gpu_round.py result for {backbone} at "
                           f"{image_size} px, {option})", False)


def read_results(path: Path) -> list[dict]:
    """gpu_round's result rows ([] when the file does not exist); a damaged file is an ``ArtifactError``."""
    from dssl.artifacts import ArtifactError

    if not path.is_file():
        return []
    try:
        rows = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ArtifactError(path, f"is not JSON ({err})", recovery="run benchmarks/gpu_round.py again") from err
    if not isinstance(rows, list) or not all(isinstance(r, dict) and all(k in r for k in RESULT_KEYS) for r in rows):
        raise ArtifactError(path, f"expected a list of result rows with {', '.join(RESULT_KEYS)}",
                            recovery="run benchmarks/gpu_round.py again")
    return rows


def merge_results(path: Path, new: list[dict]) -> list[dict]:
    """``new`` rows written into ``path``, replacing rows of the same GPU, method, backbone, option, size
    and batch; the rows now in the file."""
    fresh = {tuple(r[k] for k in RESULT_KEYS) for r in new}
    rows = [r for r in read_results(path) if tuple(r[k] for k in RESULT_KEYS) not in fresh] + list(new)
    rows.sort(key=lambda r: tuple(str(r[k]) for k in RESULT_KEYS))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    return rows

"""The GPU throughput a plan converts FLOPs into hours with: measured, or an assumed share of peak.

Pretraining, measured: ``benchmarks/gpu_round.py`` writes one row per (GPU, method, backbone, step option,
image size, batch) to ``benchmarks/results/gpu_round.json``: images/s of a paper-scale FL round and the
FLOPs per image of that method's training step (``costs``), so their product is the FLOP/s the GPU
sustained on that backbone. A plan applies it to every training stage of the same backbone, image size
and step option (the FLOP rate of one backbone is taken to carry over between methods).

Evaluation, measured: ``benchmarks/finetune_rate.py`` writes rows of the same keys plus the dataset
(``EVAL_KEYS``) to ``benchmarks/results/finetune_rate.json`` (beside the pretraining file): steady-state
fine-tuning with the paper's recipes. Evaluation stages are converted with these rows only, never with
the pretraining rows: fine-tuning runs another step (the measured one on a GPU reached a tenth of
pretraining's FLOP rate), other augmentations and batches.

Assumed, where no row matches: ``share`` x the GPU's dense peak for the step's precision (fp32: the
non-tensor-core FP32 peak; bf16: the dense BF16 tensor-core peak), printed with the assumption. Every
rate has a short ``label`` (``measured: <row>`` or ``assumed: <share> x <peak>``) that the plan prints
beside each stage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path("benchmarks/results/gpu_round.json")
EVAL_RESULTS_NAME = "finetune_rate.json"   # next to the pretraining results
RESULT_KEYS = ("device_name", "method", "backbone", "option", "size", "batch")
EVAL_KEYS = (*RESULT_KEYS, "dataset")
TRAINING, EVALUATION = "training", "evaluation"   # what a rate converts (``Throughput.rate``'s ``purpose``)

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
    label: str = ""    # ``measured: <row>`` or ``assumed: <share> x <peak>``: printed beside each stage


class Throughput:
    """FLOP/s per (backbone, image size, step option) and purpose: for training the newest matching
    gpu_round row, for evaluation the matching finetune_rate row (of ``dataset`` when given, else the
    slowest: a stage's hours are then an upper bound), on a GPU (optionally only GPUs whose name contains
    ``gpu_name``); else ``share`` of ``gpu``'s peak."""

    def __init__(self, rows: list[dict], gpu: str = DEFAULT_GPU, share: float = DEFAULT_SHARE,
                 gpu_name: str | None = None, eval_rows: list[dict] | None = None):
        if gpu not in GPU_PEAKS:
            raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(GPU_PEAKS)} (or give --peak-tflops)")
        if not 0 < share <= 1:
            raise ValueError(f"the assumed share of peak must be in (0, 1], got {share}")

        def on_gpu(rows: list[dict]) -> list[dict]:
            return [r for r in rows if str(r.get("device", "")).startswith("cuda")
                    and (gpu_name is None or gpu_name.lower() in str(r.get("device_name", "")).lower())]

        self.rows, self.eval_rows = on_gpu(rows), on_gpu(eval_rows or [])
        self.gpu, self.share = gpu, share

    @classmethod
    def from_file(cls, path: Path, eval_path: Path | None = None, **options: Any) -> Throughput:
        """The rows of ``path`` (gpu_round's) and of ``eval_path`` (default: finetune_rate.json beside it)."""
        eval_path = eval_path if eval_path is not None else Path(path).with_name(EVAL_RESULTS_NAME)
        return cls(read_results(path), eval_rows=read_results(eval_path, EVAL_KEYS), **options)

    def rate(self, backbone: str, image_size: int, option: str, purpose: str = TRAINING,
             dataset: str | None = None) -> Rate:
        """The rate of a ``purpose`` (``TRAINING`` or ``EVALUATION``) stage's FLOPs."""
        if purpose not in (TRAINING, EVALUATION):
            raise ValueError(f"purpose must be {TRAINING!r} or {EVALUATION!r}, got {purpose!r}")
        rows = self.rows if purpose == TRAINING else self.eval_rows
        matches = [r for r in rows if r["backbone"] == backbone and r["size"] == image_size
                   and r["option"] == option and r.get("flops_per_image") and r.get("images_per_s")]
        if purpose == EVALUATION and dataset is not None:
            matches = [r for r in matches if r.get("dataset") == dataset] or matches
        if matches:
            if purpose == TRAINING:
                row = max(matches, key=lambda r: r.get("date", ""))
            else:
                row = min(matches, key=lambda r: (r["images_per_s"] * r["flops_per_image"], r.get("date", "")))
            return _measured(row, purpose)
        precision = "bf16" if "bf16" in option else "fp32"
        peak = GPU_PEAKS[self.gpu]
        flops = self.share * peak[precision] * 1e12
        script = "gpu_round.py" if purpose == TRAINING else "finetune_rate.py"
        return Rate(flops, f"assumed {self.share:.0%} of the {peak['name']}'s {peak[precision]:g} TFLOP/s {precision} "
                           f"peak = {flops / 1e12:.2f} TFLOP/s (no {script} result for {backbone} at "
                           f"{image_size} px, {option})", False,
                    f"assumed: {self.share:.0%} x {peak['name']} {precision} peak")


def _measured(row: dict, purpose: str) -> Rate:
    flops = row["images_per_s"] * row["flops_per_image"]
    script = "gpu_round.py" if purpose == TRAINING else "finetune_rate.py"
    what = row["method"] if purpose == TRAINING else f"fine-tuning on {row.get('dataset', '?')}-shaped data"
    return Rate(flops, f"measured by benchmarks/{script} on {row['device_name']} ({row.get('date', '?')}): "
                       f"{row['images_per_s']:,.0f} images/s of {what} at batch {row['batch']} = "
                       f"{flops / 1e12:.1f} TFLOP/s", True,
                f"measured: {script.removesuffix('.py')} {row['device_name']} {row['method']}"
                + (f" {row['dataset']}" if purpose == EVALUATION and row.get("dataset") else "")
                + f" {row['backbone']} {row['option']} {row['size']} px batch {row['batch']}")


def read_results(path: Path, keys: tuple[str, ...] = RESULT_KEYS) -> list[dict]:
    """A benchmark's result rows, each with ``keys`` ([] when the file does not exist); a damaged file is an
    ``ArtifactError``."""
    from dssl.artifacts import ArtifactError

    if not path.is_file():
        return []
    try:
        rows = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ArtifactError(path, f"is not JSON ({err})", recovery=f"run benchmarks/{_script(path)} again") from err
    if not isinstance(rows, list) or not all(isinstance(r, dict) and all(k in r for k in keys) for r in rows):
        raise ArtifactError(path, f"expected a list of result rows with {', '.join(keys)}",
                            recovery=f"run benchmarks/{_script(path)} again")
    return rows


def merge_results(path: Path, new: list[dict], keys: tuple[str, ...] = RESULT_KEYS) -> list[dict]:
    """``new`` rows written into ``path``, replacing rows of the same ``keys`` (GPU, method, backbone,
    option, size and batch; ``EVAL_KEYS`` add the dataset); the rows now in the file."""
    fresh = {tuple(r[k] for k in keys) for r in new}
    rows = [r for r in read_results(path, keys) if tuple(r[k] for k in keys) not in fresh] + list(new)
    rows.sort(key=lambda r: tuple(str(r[k]) for k in keys))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    return rows


def _script(path: Path) -> str:
    """The benchmark that writes a results file."""
    return "finetune_rate.py" if Path(path).name == EVAL_RESULTS_NAME else "gpu_round.py"

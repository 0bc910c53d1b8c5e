#!/usr/bin/env bash
# One prepared command for a lent GPU: the pretraining round (gpu_round.py, the plan's training rows) and the
# steady-state fine-tuning rate with paper A's recipes (finetune_rate.py, the plan's evaluation rows), both
# merged into benchmarks/results/. About 8 minutes on an H200; pass a smaller STEPS for a quicker look.
#   benchmarks/device_check.sh            # from the repository root, with .venv or python on PATH
#   STEPS=300 WARMUP=20 benchmarks/device_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: these rates are GPU rates')"
"$PYTHON" benchmarks/gpu_round.py --device cuda --options plain,bf16+channels_last
"$PYTHON" benchmarks/finetune_rate.py --device cuda --steps "${STEPS:-300}" --warmup "${WARMUP:-20}" \
    --options bf16+channels_last

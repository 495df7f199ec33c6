"""The torch-free ONNX graph of the bundled BERT: sentence-transformers' vectors, no torch.

The reference vectors were computed by sentence-transformers on torch
(``scripts/torch_reference.py``) and are stored with their texts in
``tests/data/minilm_torch_reference.npz``, so these tests need neither torch nor
transformers (but the one comparing with the torch export, skipped without torch).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from tokenizers import Tokenizer

from codechunkd.config.settings import BUNDLED_MODEL, EmbeddingSettings
from codechunkd.embedding.bert_onnx import write_bert_onnx
from codechunkd.embedding.embed_onnx import OnnxEmbedder
from codechunkd.embedding.models import model_fingerprint
from codechunkd.embedding.onnx_export import (
    META_FILE,
    MODEL_FILE,
    ModelLayout,
    export_dir,
    export_model,
    model_layout,
)
from codechunkd.errors import EmbeddingError

REFERENCE = Path(__file__).parents[1] / "data" / "minilm_torch_reference.npz"


@pytest.fixture(scope="module")
def layout() -> ModelLayout:
    return model_layout(BUNDLED_MODEL)


@pytest.fixture(scope="module")
def reference() -> tuple[list[str], np.ndarray[Any, np.dtype[np.float32]]]:
    """Texts and the vectors sentence-transformers (torch) gave them."""
    with np.load(REFERENCE) as data:
        return [str(t) for t in data["texts"]], np.asarray(data["vectors"], dtype=np.float32)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory, layout: ModelLayout) -> Path:
    """The torch-free graph as ``write_bert_onnx`` writes it (its weights inside)."""
    path = tmp_path_factory.mktemp("graph") / MODEL_FILE
    write_bert_onnx(layout.transformer, path)
    return path


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory, model_file: Path) -> OnnxEmbedder:
    """The onnx backend (tokenizer, truncation, pooling) running the torch-free graph, cached
    as the export does it: the graph's weights written apart (``export_model``)."""
    onnx_dir = tmp_path_factory.mktemp("onnx")
    folder = export_dir(_settings(onnx_dir), model_fingerprint(BUNDLED_MODEL))
    folder.mkdir(parents=True)
    (folder / MODEL_FILE).write_bytes(model_file.read_bytes())
    (folder / META_FILE).write_text("{}\n")
    export_model(_settings(onnx_dir))
    return OnnxEmbedder(_settings(onnx_dir))


def _settings(onnx_dir: Path) -> EmbeddingSettings:
    return EmbeddingSettings(backend="onnx", onnx_dir=str(onnx_dir), threads=1, batch_size=32)


def _token_counts(layout: ModelLayout, texts: list[str]) -> list[int]:
    tokenizer = Tokenizer.from_file(str(layout.tokenizer_json))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return [len(e.ids) for e in tokenizer.encode_batch(texts)]


def test_graph_has_the_torch_exports_interface(model_file: Path) -> None:
    """A valid opset-17 model with the torch export's inputs and output, batch and sequence
    dynamic: the onnx backend feeds it as it fed the torch export."""
    model = onnx.load(str(model_file))
    onnx.checker.check_model(model, full_check=True)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]

    def signature(values: Any) -> list[tuple[str, int, list[str | int]]]:
        return [
            (
                v.name,
                v.type.tensor_type.elem_type,
                [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim],
            )
            for v in values
        ]

    ints = onnx.TensorProto.INT64
    assert signature(model.graph.input) == [
        ("input_ids", ints, ["batch", "sequence"]),
        ("attention_mask", ints, ["batch", "sequence"]),
        ("token_type_ids", ints, ["batch", "sequence"]),
    ]
    assert signature(model.graph.output) == [
        ("last_hidden_state", onnx.TensorProto.FLOAT, ["batch", "sequence", 384])
    ]


def test_vectors_match_sentence_transformers(
    embedder: OnnxEmbedder,
    layout: ModelLayout,
    reference: tuple[list[str], np.ndarray[Any, np.dtype[np.float32]]],
) -> None:
    """On 49 real stdlib sources (15 to 1460 tokens, truncated at 256; ß, accents, kana),
    each vector of the torch-free graph has cosine ≥ 0.99999 to sentence-transformers'."""
    texts, expected = reference
    tokens = _token_counts(layout, texts)
    assert min(tokens) < 32 and sum(n > 256 for n in tokens) >= 10, "fixture lost its range"
    assert sum(not t.isascii() for t in texts) >= 5, "fixture lost its non-ASCII texts"

    got = embedder.embed(texts)

    assert got.dtype == np.float32
    assert got.shape == expected.shape == (len(texts), 384)
    cosines = (got * expected).sum(axis=1)
    worst = int(cosines.argmin())
    assert cosines[worst] >= 0.99999, f"text {worst}: cosine {cosines[worst]:.7f}"
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_padded_batch_gives_each_text_its_own_vector(
    embedder: OnnxEmbedder,
    layout: ModelLayout,
    reference: tuple[list[str], np.ndarray[Any, np.dtype[np.float32]]],
) -> None:
    """Texts of 15 to 256 tokens in one batch (padded to 256) get the vectors they get
    alone: the attention mask keeps padding out of every real token's attention."""
    texts, _ = reference
    by_length = sorted(texts, key=lambda t: _token_counts(layout, [t])[0])
    chosen = [by_length[0], by_length[1], by_length[len(by_length) // 3], by_length[-1]]
    tokens = _token_counts(layout, chosen)
    assert tokens[0] < 32 and tokens[-1] > 256  # one batch of 32: padded ≥ 8x for the first

    together = embedder.embed(chosen)
    alone = np.stack([embedder.embed([t])[0] for t in chosen])

    np.testing.assert_allclose(together, alone, atol=2e-6)


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"model_type": "roberta"}, "model_type 'roberta'"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type 'relative_key'"),
        ({"hidden_act": "swish"}, "hidden_act 'swish'"),
        ({"is_decoder": True}, "a decoder"),
        ({"num_hidden_layers": 7}, "weight encoder.layer.6.attention.self.query.weight is missing"),
        (
            {"hidden_size": 768},
            "word_embeddings.weight has shape [30522, 384], config.json implies [30522, 768]",
        ),
    ],
)
def test_unsupported_model_is_refused_with_the_way_out(
    tmp_path: Path, layout: ModelLayout, change: dict[str, object], what: str
) -> None:
    """A config.json (or weights) the graph would not reproduce raises EmbeddingError, one
    line naming what is unsupported and the torch extra that can export it; no file is left."""
    config = json.loads((layout.transformer / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
    (tmp_path / "model.safetensors").symlink_to(layout.transformer / "model.safetensors")

    with pytest.raises(EmbeddingError) as raised:
        write_bert_onnx(tmp_path, tmp_path / "model.onnx")

    message = str(raised.value)
    assert what in message
    assert "pip install 'codechunkd[torch]'" in message and 'backend "torch"' in message
    assert "\n" not in message
    assert not (tmp_path / "model.onnx").exists()


def test_weights_of_a_model_with_a_head_give_the_same_graph(
    tmp_path: Path, layout: ModelLayout, model_file: Path
) -> None:
    """A checkpoint saved from a Bert*-with-head model (``bert.`` prefix, extra ``cls.``
    tensors) gives byte for byte the graph of the bare BertModel checkpoint."""
    from safetensors.numpy import load_file, save_file

    weights = load_file(layout.transformer / "model.safetensors")
    prefixed = {f"bert.{k}": v for k, v in weights.items()}
    prefixed["cls.predictions.bias"] = np.zeros(30522, dtype=np.float32)
    save_file(prefixed, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_bytes((layout.transformer / "config.json").read_bytes())

    write_bert_onnx(tmp_path, tmp_path / "model.onnx")

    assert (tmp_path / "model.onnx").read_bytes() == model_file.read_bytes()


def test_writing_the_graph_never_imports_torch(tmp_path: Path, layout: ModelLayout) -> None:
    """In a fresh interpreter where importing torch or transformers fails, the graph is
    written: the export works on an install without the torch extra."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "for name in ('torch', 'transformers', 'sentence_transformers'):\n"
        "    sys.modules[name] = None  # any import of them raises ImportError\n"
        "from codechunkd.embedding.bert_onnx import write_bert_onnx\n"
        f"write_bert_onnx(Path({str(layout.transformer)!r}), Path({str(tmp_path)!r}) / 'm.onnx')\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert (tmp_path / "m.onnx").stat().st_size > 80_000_000


def _padded_feed() -> dict[str, np.ndarray[Any, np.dtype[np.int64]]]:
    """Three rows of random tokens: one whole, one padded after 25 tokens, one after 3."""
    ids = np.random.default_rng(0).integers(1000, 30000, size=(3, 40), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[1, 25:] = 0
    mask[2, 3:] = 0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def _run(model: Path, feed: dict[str, np.ndarray[Any, np.dtype[np.int64]]]) -> Any:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return session.run(["last_hidden_state"], feed)[0]


@pytest.fixture
def transformers_quiet() -> Iterator[None]:
    """torch and transformers, or a skip; transformers' progress bars off meanwhile: their
    tqdm monitor thread would outlive the test."""
    pytest.importorskip("torch")
    from transformers.utils import logging as transformers_logging

    enabled = transformers_logging.is_progress_bar_enabled()
    disable: Callable[[], None] = transformers_logging.disable_progress_bar  # untyped there
    enable: Callable[[], None] = transformers_logging.enable_progress_bar
    disable()
    yield
    if enabled:
        enable()


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.usefixtures("transformers_quiet")
def test_hidden_states_equal_the_torch_export(
    tmp_path: Path, layout: ModelLayout, model_file: Path
) -> None:
    """Where torch is installed: on a padded batch the graph's last_hidden_state equals the
    torch export's, padded positions included (same ops in the same order)."""
    from codechunkd.embedding.onnx_export import _export_torch

    _export_torch(layout, tmp_path / "torch.onnx")
    feed = _padded_feed()
    np.testing.assert_allclose(
        _run(model_file, feed), _run(tmp_path / "torch.onnx", feed), rtol=0, atol=1e-5
    )


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.usefixtures("transformers_quiet")
@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu"])
def test_each_activation_computes_what_transformers_computes(
    tmp_path: Path, layout: ModelLayout, act: str
) -> None:
    """Where torch is installed: with hidden_act set to each supported activation, the graph's
    unpadded hidden states are those of transformers' BertModel (eager attention)."""
    import torch
    from transformers import AutoModel

    config = json.loads((layout.transformer / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "hidden_act": act}))
    (tmp_path / "model.safetensors").symlink_to(layout.transformer / "model.safetensors")
    write_bert_onnx(tmp_path, tmp_path / "model.onnx")
    feed = _padded_feed()

    model = AutoModel.from_pretrained(str(tmp_path), attn_implementation="eager").eval()
    with torch.no_grad():
        inputs = {k: torch.from_numpy(v) for k, v in feed.items()}
        expected = model(**inputs).last_hidden_state.numpy()

    got = _run(tmp_path / "model.onnx", feed)
    real = feed["attention_mask"].astype(bool)
    np.testing.assert_allclose(got[real], expected[real], rtol=0, atol=1e-5)

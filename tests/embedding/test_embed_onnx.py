"""The onnx backend: same vectors as sentence-transformers, no torch once exported."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from codechunkd.chunking.tokens import counter_for
from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.batching import CPU_BATCH_TOKENS
from codechunkd.embedding.embed_onnx import (
    SESSIONS_MEMORY,
    OnnxEmbedder,
    SessionLayout,
    layout_candidates,
    max_sessions,
    pool,
    pooling_modes,
)
from codechunkd.embedding.embed_torch import TorchEmbedder
from codechunkd.embedding.embedder import make_embedder
from codechunkd.embedding.models import model_fingerprint
from codechunkd.embedding.onnx_export import (
    META_FILE,
    MODEL_FILE,
    WEIGHTS_FILE,
    cached_model,
    export_dir,
    export_in_subprocess,
    export_model,
)
from codechunkd.errors import EmbeddingError
from codechunkd.platform import usable_cpus

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def stdlib_functions(count: int) -> list[str]:
    """Real code: function and method sources (with their indentation) from the stdlib."""
    out: list[str] = []
    for name in ("textwrap.py", "shutil.py", "difflib.py", "argparse.py", "configparser.py"):
        source = (STDLIB / name).read_text()
        lines = source.splitlines(keepends=True)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and node.end_lineno is not None:
                text = "".join(lines[node.lineno - 1 : node.end_lineno])
                if 200 <= len(text) <= 3000:
                    out.append(text)
                    if len(out) == count:
                        return out
    return out


@pytest.fixture(scope="session")
def onnx_settings(tmp_path_factory: pytest.TempPathFactory) -> EmbeddingSettings:
    """Settings whose model is exported once per test session, into a temporary cache."""
    settings = EmbeddingSettings(
        backend="onnx", onnx_dir=str(tmp_path_factory.mktemp("onnx")), batch_size=16
    )
    path = export_in_subprocess(settings)  # what the backend does on first use
    assert path == cached_model(settings, model_fingerprint(settings.model))
    return settings


@pytest.mark.slow
@pytest.mark.torch
def test_onnx_matches_sentence_transformers(onnx_settings: EmbeddingSettings) -> None:
    """On 60 real functions (some truncated at 256 tokens) the vectors equal torch's."""
    texts = stdlib_functions(60)
    assert len(texts) == 60
    tokens = counter_for(onnx_settings.model)(texts)
    assert any(n > onnx_settings.max_seq_length for n in tokens), "no text exercises truncation"

    onnx = OnnxEmbedder(onnx_settings)
    torch = TorchEmbedder(EmbeddingSettings(batch_size=16))
    got, expected = onnx.embed(texts), torch.embed(texts)

    assert expected.shape == got.shape == (60, 384)
    assert got.dtype == np.float32
    cosines = (got * expected).sum(axis=1)
    assert cosines.mean() >= 0.9999
    assert cosines.min() >= 0.999
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert torch.model_id == onnx.model_id


@pytest.mark.slow
def test_vectors_do_not_depend_on_batching(onnx_settings: EmbeddingSettings) -> None:
    """A text alone, in a padded batch, or repeated gets the same vector, in input order."""
    texts = stdlib_functions(5)
    embedder = OnnxEmbedder(onnx_settings)
    batch = embedder.embed([texts[0], *texts, texts[0]])
    alone = embedder.embed([texts[0]])
    np.testing.assert_allclose(batch[0], alone[0], atol=1e-5)
    np.testing.assert_array_equal(batch[0], batch[-1])
    np.testing.assert_allclose(batch[1:-1], embedder.embed(texts), atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


@pytest.mark.slow
def test_long_texts_go_through_in_small_batches(onnx_settings: EmbeddingSettings) -> None:
    """Long texts are batched by padded tokens (``CPU_BATCH_TOKENS``), however large
    ``batch_size`` is: a session's memory arena keeps its largest batch for good."""
    settings = replace(onnx_settings, sessions=1, threads=1, batch_size=32)
    embedder = OnnxEmbedder(settings)
    texts = stdlib_functions(40)
    tokens = counter_for(settings.model)(texts)
    padded = [min(n, settings.max_seq_length) for n in tokens]
    embedder.embed(texts)
    least = -(-sum(padded) // CPU_BATCH_TOKENS)  # batches no fewer than the tokens need
    assert embedder.session_batches[0] >= least > -(-len(texts) // settings.batch_size)


@pytest.mark.slow
def test_cached_model_runs_without_torch(onnx_settings: EmbeddingSettings) -> None:
    """With the export cached, embedding imports neither torch nor transformers."""
    script = (
        "import json, sys\n"
        "from codechunkd.config.settings import EmbeddingSettings\n"
        "from codechunkd.embedding.embedder import make_embedder\n"
        f"settings = EmbeddingSettings(backend='onnx', onnx_dir={onnx_settings.onnx_dir!r})\n"
        "e = make_embedder(settings)\n"
        "v = e.embed(['def add(a, b):\\n    return a + b\\n'])\n"
        "print(json.dumps({'torch': 'torch' in sys.modules,\n"
        "                  'transformers': 'transformers' in sys.modules,\n"
        "                  'vector': v[0].tolist()}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    result = json.loads(done.stdout)
    assert result["torch"] is False
    assert result["transformers"] is False
    here = OnnxEmbedder(onnx_settings).embed(["def add(a, b):\n    return a + b\n"])
    np.testing.assert_allclose(np.array(result["vector"], dtype=np.float32), here[0], atol=1e-6)


@pytest.mark.slow
def test_failed_export_leaves_nothing(tmp_path: Path) -> None:
    """An export that fails midway raises EmbeddingError naming the problem, and leaves no
    (partial) model."""
    model = tmp_path / "broken-model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "bert", "hidden_size": "oops"}')
    cache = tmp_path / "cache"
    settings = EmbeddingSettings(backend="onnx", model=str(model), onnx_dir=str(cache))
    with pytest.raises(EmbeddingError, match="hidden_size must be a positive integer"):
        export_model(settings)
    assert [p.name for p in cache.iterdir()] == []
    assert cached_model(settings, model_fingerprint(settings.model)) is None


def test_export_in_subprocess_reports_the_error(tmp_path: Path) -> None:
    """The child's failure comes back as an EmbeddingError with its reason."""
    settings = EmbeddingSettings(
        backend="onnx", model=str(tmp_path / "missing"), onnx_dir=str(tmp_path)
    )
    with pytest.raises(EmbeddingError, match="needs a local model directory"):
        export_in_subprocess(settings)


def test_incomplete_export_is_not_used(tmp_path: Path) -> None:
    """A directory with a model file but without meta.json (a crash) or without the weights
    beside the graph is not a cached export."""
    settings = EmbeddingSettings(backend="onnx", onnx_dir=str(tmp_path))
    fingerprint = model_fingerprint(settings.model)
    folder = export_dir(settings, fingerprint)
    folder.mkdir(parents=True)
    (folder / MODEL_FILE).write_bytes(b"half a model")
    assert cached_model(settings, fingerprint) is None
    (folder / META_FILE).write_text("{}")
    assert cached_model(settings, fingerprint) is None
    (folder / WEIGHTS_FILE).write_bytes(b"weights")
    assert folder / MODEL_FILE == cached_model(settings, fingerprint)


def test_an_export_keeps_its_weights_beside_the_graph(onnx_settings: EmbeddingSettings) -> None:
    """The exported graph holds no weights: they are in ``model.onnx.data``, which
    onnxruntime maps instead of parsing them out of the graph (a session opens ~4x sooner)."""
    model = cached_model(onnx_settings, model_fingerprint(onnx_settings.model))
    assert model is not None
    assert model.stat().st_size < 2**20
    assert (model.parent / WEIGHTS_FILE).stat().st_size > 80_000_000
    assert max_sessions(model, budget=150 * 2**20) == 1  # its weights count, not the graph alone


@pytest.mark.slow
def test_an_export_whose_weights_file_is_gone_is_made_again(tmp_path: Path) -> None:
    """A cached export missing its weights file (deleted, a disk cleaned) is exported again
    on the next load, which then embeds as the bundled model does."""
    settings = EmbeddingSettings(backend="onnx", onnx_dir=str(tmp_path), sessions=1, threads=1)
    fingerprint = model_fingerprint(settings.model)
    model = export_model(settings)
    want = OnnxEmbedder(settings).embed(["def add(a, b):\n    return a + b\n"])
    (model.parent / WEIGHTS_FILE).unlink()
    assert cached_model(settings, fingerprint) is None

    again = OnnxEmbedder(settings)
    got = again.embed(["def add(a, b):\n    return a + b\n"])
    assert again.model_file == model and (model.parent / WEIGHTS_FILE).is_file()
    np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_an_earlier_export_that_cannot_be_converted_is_run_as_it_is(tmp_path: Path) -> None:
    """An export of the earlier layout (weights inside the graph) where the converted copy
    cannot be written (here a process allowed files of 10 MB at most, as on a full disk or
    in a cache a service only reads) is run as it is: a warning, the same vectors."""
    import resource

    from codechunkd.embedding.bert_onnx import write_bert_onnx
    from codechunkd.embedding.onnx_export import model_layout

    settings = EmbeddingSettings(
        backend="onnx", onnx_dir=str(tmp_path / "onnx"), sessions=1, threads=1
    )
    folder = export_dir(settings, model_fingerprint(settings.model))
    write_bert_onnx(model_layout(settings.model).transformer, folder / MODEL_FILE)
    (folder / META_FILE).write_text("{}")
    text = "def add(a, b):\n    return a + b\n"
    script = (
        "import json, sys\n"
        "from codechunkd import logs\n"
        "from codechunkd.config.settings import EmbeddingSettings\n"
        "from codechunkd.embedding.embed_onnx import OnnxEmbedder\n"
        "logs.configure()\n"
        f"s = EmbeddingSettings(backend='onnx', onnx_dir={settings.onnx_dir!r}, sessions=1, "
        "threads=1)\n"
        f"print(json.dumps(OnnxEmbedder(s).embed([{text!r}])[0].tolist()))\n"
    )

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (10 * 2**20, 10 * 2**20))

    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=small_files,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "model_export_kept" in done.stderr
    assert not (folder / WEIGHTS_FILE).exists()
    got = np.array(json.loads(done.stdout.strip().splitlines()[-1]), dtype=np.float32)
    converted = OnnxEmbedder(settings)  # here files may be large: converted on load
    np.testing.assert_array_equal(got, converted.embed([text])[0])
    assert (folder / WEIGHTS_FILE).is_file()


@pytest.mark.slow
def test_an_export_made_with_its_weights_inside_moves_them_out(tmp_path: Path) -> None:
    """A cached export from before (the weights inside the graph) is not used as it is: the
    next load writes its weights apart, and the graph gives the same hidden states."""
    import onnxruntime as ort

    from codechunkd.embedding.bert_onnx import write_bert_onnx
    from codechunkd.embedding.onnx_export import export_model, model_layout

    settings = EmbeddingSettings(backend="onnx", onnx_dir=str(tmp_path / "onnx"))
    fingerprint = model_fingerprint(settings.model)
    inside = tmp_path / "inside" / MODEL_FILE
    write_bert_onnx(model_layout(settings.model).transformer, inside)
    folder = export_dir(settings, fingerprint)
    folder.mkdir(parents=True)
    (folder / MODEL_FILE).write_bytes(inside.read_bytes())
    (folder / META_FILE).write_text("{}")
    assert cached_model(settings, fingerprint) is None

    model = export_model(settings)
    assert model == cached_model(settings, fingerprint) == folder / MODEL_FILE
    assert model.stat().st_size < 2**20 < (folder / WEIGHTS_FILE).stat().st_size
    ids = np.array([[101, 2054, 2003, 1037, 3231, 102], [101, 2330, 1037, 5371, 102, 0]])
    feed = {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64)}
    feed["token_type_ids"] = np.zeros_like(ids)
    outputs = [
        ort.InferenceSession(str(m), providers=["CPUExecutionProvider"]).run(None, feed)[0]
        for m in (inside, model)
    ]
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_model_ids() -> None:
    """fp32 onnx shares torch's model id (and cache); the int8 copy and other lengths do not."""
    torch_id = TorchEmbedder(EmbeddingSettings()).model_id
    assert torch_id == OnnxEmbedder(EmbeddingSettings(backend="onnx")).model_id
    quantized = OnnxEmbedder(EmbeddingSettings(backend="onnx", quantized=True)).model_id
    shorter = OnnxEmbedder(EmbeddingSettings(backend="onnx", max_seq_length=128)).model_id
    assert len({torch_id, quantized, shorter}) == 3


def test_make_embedder_picks_the_backend() -> None:
    """The factory is the one place the backend is chosen."""
    assert isinstance(make_embedder(EmbeddingSettings(backend="onnx")), OnnxEmbedder)
    assert isinstance(make_embedder(EmbeddingSettings(backend="torch")), TorchEmbedder)
    with pytest.raises(EmbeddingError, match="unknown embedding backend"):
        make_embedder(EmbeddingSettings(backend="tpu"))


def test_unsupported_module_is_refused(tmp_path: Path) -> None:
    """A model with a module the onnx path does not reproduce (a Dense layer) is refused."""
    (tmp_path / "modules.json").write_text(
        json.dumps(
            [
                {
                    "idx": 0,
                    "name": "0",
                    "path": "",
                    "type": "sentence_transformers.models.Transformer",
                },
                {
                    "idx": 1,
                    "name": "1",
                    "path": "2_Dense",
                    "type": "sentence_transformers.models.Dense",
                },
            ]
        )
    )
    settings = EmbeddingSettings(backend="onnx", model=str(tmp_path), onnx_dir=str(tmp_path / "c"))
    with pytest.raises(EmbeddingError, match="Dense"):
        OnnxEmbedder(settings).load()


def test_pooling_follows_the_config() -> None:
    """Mean, CLS and max pooling ignore padding the way sentence-transformers does."""
    hidden = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]], dtype=np.int64)
    assert pooling_modes({"pooling_mode_mean_tokens": True}) == ("mean",)
    assert pooling_modes({"pooling_mode": "cls"}) == ("cls",)
    np.testing.assert_allclose(pool(hidden, mask, ["mean"]), [[2.0, 3.0]])
    np.testing.assert_allclose(pool(hidden, mask, ["cls"]), [[1.0, 2.0]])
    np.testing.assert_allclose(pool(hidden, mask, ["max"]), [[3.0, 4.0]])
    np.testing.assert_allclose(pool(hidden, mask, ["lasttoken"]), [[3.0, 4.0]])
    with pytest.raises(EmbeddingError, match="pooling mode"):
        pool(hidden, mask, ["median"])


def test_layout_is_measured_once_and_cached(onnx_settings: EmbeddingSettings) -> None:
    """threads = sessions = 0: the first load times every candidate layout (one session of
    1, 2, … threads and all cores split among sessions); the next load reads the choice."""

    from structlog.testing import capture_logs

    settings = replace(onnx_settings, threads=0, sessions=0)
    first = OnnxEmbedder(settings)
    assert first.model_file is not None
    cache = first.model_file.parent / f"layout-{usable_cpus()}cpu-0x0.json"
    cache.unlink(missing_ok=True)  # other tests of the session may have measured already
    with capture_logs() as logs:
        first.embed(["def f(): pass"])
    measured = json.loads(cache.read_text())
    candidates = layout_candidates(usable_cpus(), max_sessions(first.model_file))
    assert set(measured["texts_per_s"]) == {c.name for c in candidates}
    assert (first.sessions, first.threads) == (measured["sessions"], measured["threads"])
    assert first.sessions >= 1 and first.threads >= 1
    assert [e for e in logs if e["event"] == "layout_calibrated"]
    again = OnnxEmbedder(settings)
    with capture_logs() as logs:
        again.embed(["def f(): pass"])
    assert (again.sessions, again.threads) == (first.sessions, first.threads)
    assert not [e for e in logs if e["event"] == "layout_calibrated"]
    # Damaged: no session (the embedder refused to run) and more threads than any machine
    # has (it hung); no layout it would choose, so it is measured again, not used.
    cache.write_text('{"sessions": 0, "threads": 100000}')
    third = OnnxEmbedder(settings)
    with capture_logs() as logs:
        third.embed(["def f(): pass"])
    assert SessionLayout(third.sessions, third.threads) in candidates
    assert [e for e in logs if e["event"] == "layout_calibrated"]


def test_fixed_layout_is_not_measured(onnx_settings: EmbeddingSettings) -> None:
    """threads and sessions both set: that layout is opened, nothing is timed or cached."""
    from structlog.testing import capture_logs

    settings = replace(onnx_settings, threads=1, sessions=2)
    embedder = OnnxEmbedder(settings)
    with capture_logs() as logs:
        embedder.embed(["def f(): pass"])
    assert (embedder.sessions, embedder.threads) == (2, 1)
    assert not [e for e in logs if e["event"] == "layout_calibrated"]


@pytest.mark.slow
def test_sessions_change_no_vector(onnx_settings: EmbeddingSettings) -> None:
    """The same texts through one 2-thread session and two 1-thread sessions give the same
    vectors (within 1e-6), in input order, duplicates included."""
    texts = stdlib_functions(40)
    texts = [*texts, texts[3], texts[0]]
    one = OnnxEmbedder(onnx_settings)
    one.load(SessionLayout(sessions=1, threads=2))
    two = OnnxEmbedder(onnx_settings)
    two.load(SessionLayout(sessions=2, threads=1))
    assert (one.sessions, two.sessions) == (1, 2)
    a, b = one.embed(texts), two.embed(texts)
    assert a.shape == b.shape == (42, 384)
    np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
    np.testing.assert_array_equal(b[-1], b[0])
    np.testing.assert_array_equal(b[-2], b[3])
    np.testing.assert_allclose(b[5:7], two.embed(texts[5:7]), atol=1e-5)


def test_layout_candidates_use_every_core() -> None:
    """On 16 cores: one session of 1…16 threads and 16x1, 8x2, 4x4, 2x8; the memory cap and
    a fixed setting narrow the list; fewest threads in all come first."""
    names = [c.name for c in layout_candidates(16, 22)]
    assert set(names) == {"1x1", "1x2", "1x4", "1x8", "1x16", "16x1", "8x2", "4x4", "2x8"}
    assert names[0] == "1x1" and names[-1] == "16x1"
    assert {c.name for c in layout_candidates(2, 22)} == {"1x1", "1x2", "2x1"}
    assert {c.name for c in layout_candidates(1, 22)} == {"1x1"}
    assert {c.name for c in layout_candidates(16, 11)} >= {"11x1", "8x2"}
    assert all(c.sessions <= 11 for c in layout_candidates(16, 11))
    assert {c.name for c in layout_candidates(16, 22, threads=1)} == {"1x1", "16x1"}
    assert {c.name for c in layout_candidates(16, 22, sessions=4)} == {"4x1", "4x2", "4x4"}
    assert {c.name for c in layout_candidates(6, 22)} >= {"6x1", "3x2", "1x6"}


def test_sessions_are_capped_by_the_weights(tmp_path: Path) -> None:
    """As many sessions as copies of the model file fit in the budget, and at least one."""
    model = tmp_path / "model.onnx"
    model.write_bytes(b"w" * 1000)
    assert max_sessions(model, budget=10_500) == 10
    assert max_sessions(model, budget=10) == 1
    assert max_sessions(tmp_path / "missing.onnx") == 1
    assert SESSIONS_MEMORY // (91 * 1024**2) >= 16  # the bundled model on 16 cores


def test_import_pulls_no_storage_or_git() -> None:
    """The onnx backend imports without lancedb, pygit2 or torch: bench/embedding.py runs on a
    machine with only onnxruntime, tokenizers and numpy (and structlog)."""
    script = (
        "import sys, json\n"
        "import codechunkd.embedding.embed_onnx\n"
        "print(json.dumps(sorted(m for m in ('lancedb', 'pygit2', 'torch', 'pyarrow',\n"
        "    'watchdog', 'tree_sitter', 'onnxruntime') if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == []


def test_a_reading_process_embeds_queries_with_one_session_of_one_thread(
    onnx_settings: EmbeddingSettings,
) -> None:
    """``query_embedder`` (``codechunkd search``, the MCP server) opens one session of one
    thread whatever the settings ask for the indexer: a reader embeds a query or two, and a
    second session or thread only costs CPU.  Its vectors are the indexer's, same model id."""
    from codechunkd.config.settings import Settings
    from codechunkd.storage.reader import query_embedder

    wide = replace(onnx_settings, sessions=2, threads=2)
    reader = query_embedder(Settings(embedding=wide))
    query = ["open a file and read its lines"]
    got = reader.embed(query)
    assert isinstance(reader, OnnxEmbedder)
    assert (reader.sessions, reader.threads, len(reader.session_batches)) == (1, 1, 1)
    indexer = OnnxEmbedder(wide)
    np.testing.assert_allclose(got, indexer.embed(query), atol=1e-5)
    assert reader.model_id == indexer.model_id


def test_a_model_trained_in_place_gets_a_new_id(tmp_path: Path) -> None:
    """Weights rewritten in place at the same size (a fine-tune saved over its directory)
    change the model id, so neither the old export nor vectors cached under the old id (the
    embedding cache's key) serve the new weights."""
    from safetensors.numpy import load_file, save_file

    from codechunkd.embedding.models import bundled_model_path

    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    settings = EmbeddingSettings(backend="onnx", model=str(model), onnx_dir=str(tmp_path / "c"))
    before = OnnxEmbedder(settings).model_id
    weights = load_file(str(model / "model.safetensors"))
    name = next(k for k in weights if k.endswith("encoder.layer.5.output.dense.weight"))
    weights[name] = weights[name] * np.float32(0.5)
    size = (model / "model.safetensors").stat().st_size
    save_file(weights, str(model / "model.safetensors"), metadata={"format": "pt"})
    assert (model / "model.safetensors").stat().st_size == size
    assert OnnxEmbedder(settings).model_id != before
    assert OnnxEmbedder(settings).model_id == OnnxEmbedder(settings).model_id  # stable
    bundled = EmbeddingSettings(backend="onnx")
    assert OnnxEmbedder(bundled).model_id == "all-MiniLM-L6-v2@abc18903e790/seq256"  # unmoved

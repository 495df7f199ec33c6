"""Reference vectors of the bundled model computed by sentence-transformers on torch, and
a comparison of the torch-free ONNX graph (``codechunkd.embedding.bert_onnx``) with them.

    .venv/bin/python scripts/torch_reference.py            # rewrite the test fixture
    .venv/bin/python scripts/torch_reference.py --compare  # cosines, hidden states, speed

Both modes need torch and sentence-transformers (the torch extra); the test that reads
the fixture (tests/embedding/test_bert_onnx.py) needs neither.  The texts are real code
nobody here wrote: sources of Python standard-library functions and classes, short ones,
ones over 256 tokens (so truncation is exercised) and a few with non-ASCII characters.
They are stored in the fixture next to their vectors, so the test does not depend on
the Python version it runs on.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "minilm_torch_reference.npz"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
sys.path.insert(0, str(ROOT / "src"))

from codechunkd.config.settings import BUNDLED_MODEL, EmbeddingSettings  # noqa: E402
from codechunkd.embedding.bert_onnx import write_bert_onnx  # noqa: E402
from codechunkd.embedding.embed_onnx import OnnxEmbedder  # noqa: E402
from codechunkd.embedding.models import model_fingerprint, model_path  # noqa: E402
from codechunkd.embedding.onnx_export import (  # noqa: E402
    META_FILE,
    MODEL_FILE,
    _export_torch,
    export_dir,
    model_layout,
)

#: The fixture's texts: ``module:qualified.name`` of stdlib objects written in Python.
FIXTURE_OBJECTS = (
    "operator:add",
    "copy:_copy_immutable",
    "string:Formatter.format",
    "calendar:isleap",
    "posixpath:basename",
    "posixpath:dirname",
    "string:capwords",
    "base64:b64encode",
    "zipfile:is_zipfile",
    "logging:Logger.isEnabledFor",
    "textwrap:indent",
    "shutil:copyfileobj",
    "functools:wraps",
    "statistics:mean",
    "posixpath:join",
    "posixpath:relpath",
    "os:makedirs",
    "json.decoder:JSONDecoder.raw_decode",
    "collections:Counter.most_common",
    "contextlib:contextmanager",
    "ipaddress:ip_address",
    "urllib.parse:quote",
    "calendar:monthrange",
    "fnmatch:translate",
    "difflib:get_close_matches",
    "tempfile:mkdtemp",
    "random:Random.shuffle",
    "dataclasses:field",
    "textwrap:dedent",
    "heapq:merge",
    "heapq:nsmallest",
    "functools:total_ordering",
    "functools:lru_cache",
    "shutil:which",
    "shutil:rmtree",
    "json:dumps",
    "os:walk",
    "textwrap:TextWrapper._wrap_chunks",
    "difflib:SequenceMatcher.find_longest_match",
    "urllib.parse:urlsplit",
    "argparse:ArgumentParser.parse_known_args",
    "subprocess:run",
    "csv:Sniffer._guess_quote_and_delimiter",
    # non-ASCII: ß, ’, accented letters, an en dash
    "email.message:Message.add_header",
    "runpy:run_module",
    "runpy:run_path",
    "shlex:shlex.__init__",
    "statistics:_normal_dist_inv_cdf",
    # Japanese kana (out of the model's vocabulary)
    "distutils.tests.test_archive_util:ArchiveUtilTestCase.test_make_tarball_extended",
)

#: Modules whose functions make the larger comparison set.
CORPUS_MODULES = (
    "argparse",
    "configparser",
    "difflib",
    "shutil",
    "tarfile",
    "zipfile",
    "email.message",
    "email.utils",
    "http.client",
    "urllib.parse",
    "logging",
    "subprocess",
    "inspect",
    "pathlib",
    "calendar",
    "statistics",
    "fractions",
    "ipaddress",
    "pydoc",
    "smtplib",
)

Matrix = npt.NDArray[np.float32]
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def stdlib_source(spec: str) -> str:
    """The source of ``module:qualified.name`` (decorators included), read from the file.

    Read with ``ast`` rather than ``inspect.getsource``: the latter fails for frozen
    modules (``os``, ``posixpath``, ``runpy``) and for functions a C accelerator replaces.
    """
    module, _, qualname = spec.partition(":")
    base = STDLIB.joinpath(*module.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    source = path.read_text(encoding="utf-8")
    body = ast.parse(source).body
    found: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None = None
    for part in qualname.split("."):
        found = next(
            n
            for n in body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and n.name == part
        )
        body = found.body
    assert found is not None and found.end_lineno is not None
    start = min([found.lineno, *(d.lineno for d in found.decorator_list)])
    return "".join(source.splitlines(keepends=True)[start - 1 : found.end_lineno])


def fixture_texts() -> list[str]:
    """The source of every object of FIXTURE_OBJECTS, indentation kept as a chunk keeps it."""
    return [stdlib_source(spec) for spec in FIXTURE_OBJECTS]


def corpus_texts(count: int, exclude: Sequence[str]) -> list[str]:
    """``count`` function sources (80 to 6000 characters) from CORPUS_MODULES, in file order."""
    seen = set(exclude)
    out: list[str] = []
    for name in CORPUS_MODULES:
        base = STDLIB.joinpath(*name.split("."))
        path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines(keepends=True)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
                text = "".join(lines[node.lineno - 1 : node.end_lineno])
                if 80 <= len(text) <= 6000 and text not in seen:
                    seen.add(text)
                    out.append(text)
                    if len(out) == count:
                        return out
    raise SystemExit(f"only {len(out)} functions in {CORPUS_MODULES}, wanted {count}")


def sentence_transformers_vectors(texts: Sequence[str]) -> tuple[Matrix, str]:
    """Normalised vectors from sentence-transformers, and the versions that made them."""
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_path(BUNDLED_MODEL)), device="cpu")
    assert model.max_seq_length == 256, model.max_seq_length
    vectors = model.encode(
        list(texts), batch_size=32, normalize_embeddings=True, convert_to_numpy=True
    )
    versions = (
        f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, "
        f"Python {sys.version.split()[0]}, max_seq_length 256, normalize_embeddings=True"
    )
    return np.asarray(vectors, dtype=np.float32), versions


def write_fixture() -> None:
    texts = fixture_texts()
    vectors, versions = sentence_transformers_vectors(texts)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        FIXTURE, texts=np.array(texts, dtype=str), vectors=vectors, made_by=np.array(versions)
    )
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_layout(BUNDLED_MODEL).tokenizer_json))
    tokenizer.no_truncation()  # tokenizer.json itself truncates and pads to 128
    tokenizer.no_padding()
    tokens = [len(e.ids) for e in tokenizer.encode_batch(texts)]
    print(
        f"{FIXTURE}: {len(texts)} texts ({min(tokens)}..{max(tokens)} tokens, "
        f"{sum(n > 256 for n in tokens)} truncated at 256, "
        f"{sum(not t.isascii() for t in texts)} non-ASCII), "
        f"{FIXTURE.stat().st_size} bytes; {versions}"
    )


def embedder_on(model_file: Path, cache: Path) -> OnnxEmbedder:
    """An onnx-backend embedder that runs ``model_file``, put where the export cache has it."""
    settings = EmbeddingSettings(backend="onnx", onnx_dir=str(cache), threads=1, batch_size=32)
    folder = export_dir(settings, model_fingerprint(settings.model))
    folder.mkdir(parents=True)
    (folder / MODEL_FILE).hardlink_to(model_file)
    (folder / META_FILE).write_text("{}\n")
    return OnnxEmbedder(settings)


def cosines(a: Matrix, b: Matrix) -> str:
    c = (a * b).sum(axis=1, dtype=np.float64)
    return f"min {c.min():.8f}  mean {c.mean():.8f}  (1 - min = {1 - c.min():.1e}, n={len(c)})"


def hidden_state_difference(free: Path, torch: Path, texts: Sequence[str]) -> str:
    """Largest |Δ| of last_hidden_state between the two graphs on padded batches of 32."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_layout(BUNDLED_MODEL).tokenizer_json))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding()
    sessions = [
        ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]) for p in (free, torch)
    ]
    worst = worst_valid = 0.0
    for start in range(0, len(texts), 32):
        encodings = tokenizer.encode_batch(list(texts[start : start + 32]))
        feed = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        a, b = (s.run(["last_hidden_state"], feed)[0] for s in sessions)
        diff = np.abs(a - b)
        worst = max(worst, float(diff.max()))
        worst_valid = max(worst_valid, float(diff[feed["attention_mask"] == 1].max()))
    return f"max |Δ| {worst:.3g} over all positions, {worst_valid:.3g} over unpadded ones"


def speed(models: dict[str, Path], texts: Sequence[str], repeats: int = 3) -> None:
    """onnxruntime texts/s of each graph: 1 thread, the backend's session options, batches
    of 32 texts sorted by length as the backend forms them.  Each batch runs on the graphs
    in turn, ``repeats`` times, and its fastest run counts: on a busy machine, the other
    load then slows neither graph more than the other."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_layout(BUNDLED_MODEL).tokenizer_json))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    encodings = sorted(tokenizer.encode_batch(list(texts)), key=lambda e: len(e.ids))
    feeds = []
    for start in range(0, len(encodings), 32):
        batch = encodings[start : start + 32]
        width = max(len(e.ids) for e in batch)
        feed = {n: np.zeros((len(batch), width), dtype=np.int64) for n in _INPUTS}
        for row, e in enumerate(batch):
            feed["input_ids"][row, : len(e.ids)] = e.ids
            feed["attention_mask"][row, : len(e.ids)] = 1
            feed["token_type_ids"][row, : len(e.ids)] = e.type_ids
        feeds.append(feed)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sessions = {
        name: ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        for name, path in models.items()
    }
    for session in sessions.values():
        session.run(None, feeds[-1])  # warm up on the widest batch
    total = dict.fromkeys(sessions, 0.0)
    for feed in feeds:
        best = dict.fromkeys(sessions, float("inf"))
        for _ in range(repeats):
            for name, session in sessions.items():
                started = time.perf_counter()
                session.run(None, feed)
                best[name] = min(best[name], time.perf_counter() - started)
        for name in sessions:
            total[name] += best[name]
    for name, seconds in total.items():
        print(f"  {name:<12} {len(texts) / seconds:7.1f} texts/s ({seconds:.2f} s)")


def compare(count: int) -> None:
    reference = np.load(FIXTURE)
    texts = [str(t) for t in reference["texts"]]
    corpus = corpus_texts(count, texts)
    layout = model_layout(BUNDLED_MODEL)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            write_bert_onnx(layout.transformer, work / "free.onnx")
            timings.append(time.perf_counter() - started)
        size = (work / "free.onnx").stat().st_size
        print(f"write_bert_onnx: best {min(timings):.2f} s of 3 ({size} bytes)")
        started = time.perf_counter()
        _export_torch(layout, work / "torch.onnx")
        seconds = time.perf_counter() - started
        print(f"torch export (_export_torch, importing torch included): {seconds:.2f} s")
        free = embedder_on(work / "free.onnx", work / "cache-free")
        torch = embedder_on(work / "torch.onnx", work / "cache-torch")

        got = free.embed(texts)
        print(f"fixture vs torch-free graph: {cosines(got, reference['vectors'])}")
        expected, _ = sentence_transformers_vectors(corpus)
        print(
            f"{len(corpus)} stdlib functions, sentence-transformers vs torch-free graph: "
            f"{cosines(free.embed(corpus), expected)}"
        )
        print(
            f"{len(corpus)} stdlib functions, sentence-transformers vs torch export:     "
            f"{cosines(torch.embed(corpus), expected)}"
        )
        print(
            f"last_hidden_state, torch-free vs torch export on {len(corpus)} texts: "
            f"{hidden_state_difference(work / 'free.onnx', work / 'torch.onnx', corpus)}"
        )
        print(f"onnxruntime, {len(corpus)} texts, batches of 32, 1 thread:")
        speed({"torch-free": work / "free.onnx", "torch export": work / "torch.onnx"}, corpus)


def main() -> None:
    for name, value in [
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
        ("TRANSFORMERS_VERBOSITY", "error"),
    ]:
        os.environ.setdefault(name, value)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", action="store_true", help="compare instead of writing")
    parser.add_argument("--count", type=int, default=500, help="stdlib functions to compare on")
    args = parser.parse_args()
    if args.compare:
        compare(args.count)
    else:
        write_fixture()


if __name__ == "__main__":
    main()

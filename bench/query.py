"""Query latency at 10k, 100k (and optionally 1M) rows: vector, full-text, hybrid.

Rows are real chunks of code nobody on this project wrote, with real-model
vectors: they come from an index built by ``bench/incremental.py`` (the stdlib
and site-packages; default bench/out/index-300-w32).  Larger sizes repeat those
rows with unique ids and slightly perturbed (re-normalised) vectors, which is
what "synthetic rows at scale" means here.  Queries are the first sentences of
real docstrings, embedded with the same model.

Prints p50/p95 per mode and size, before and after the background vector index
(IVF-PQ) is built, in-process through ``Searcher`` (query embedding excluded and
reported separately).

    .venv/bin/python bench/query.py --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codechunkd.config import load_settings
from codechunkd.embedding.embedder import make_embedder
from codechunkd.storage.fulltext import identifier_words
from codechunkd.storage.schema import CHUNKS
from codechunkd.storage.search import Mode, Searcher
from codechunkd.storage.store import IndexStore

OUT = Path(__file__).parent / "out"


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def load_source(path: Path) -> pa.Table:
    db = lancedb.connect(str(path), read_consistency_interval=timedelta(0))
    table = db.open_table(CHUNKS).to_arrow()
    if "fts_text" not in table.schema.names:  # made by an older codechunkd: derive the column
        words = [identifier_words(s) for s in table.column("symbol").to_pylist()]
        fts = [
            f"{sym} {w}\n{summ}\n{content}"
            for sym, w, summ, content in zip(
                table.column("symbol").to_pylist(),
                words,
                table.column("summary").to_pylist(),
                table.column("content").to_pylist(),
                strict=True,
            )
        ]
        at = table.schema.get_field_index("embed_hash") + 1
        table = table.add_column(at, pa.field("fts_text", pa.string()), pa.array(fts))
    return table


def scaled(base: pa.Table, n: int, rng: np.random.Generator) -> pa.Table:
    """n rows: the real rows, repeated with new ids and perturbed vectors."""
    parts = []
    dim = base.schema.field("vector").type.list_size
    base_vecs = np.asarray(base.column("vector").combine_chunks().flatten()).reshape(-1, dim)
    copies = -(-n // base.num_rows)
    for c in range(copies):
        t = base
        if c:
            ids = pc.binary_join_element_wise(t.column("id"), pa.scalar(f"#{c}"), "")
            noise = rng.normal(0, 0.02, base_vecs.shape).astype(np.float32)
            v = base_vecs + noise
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            vec = pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), dim)
            t = t.set_column(t.schema.get_field_index("id"), "id", ids)
            t = t.set_column(t.schema.get_field_index("vector"), t.schema.field("vector"), vec)
            t = t.cast(base.schema)
        parts.append(t)
    return pa.concat_tables(parts).slice(0, n)


def queries(base: pa.Table, count: int) -> list[str]:
    out = []
    for doc in base.column("docstring").to_pylist():
        first = (doc or "").strip().split("\n\n")[0].split(". ")[0].strip()
        if 20 <= len(first) <= 120:
            out.append(first)
        if len(out) >= count:
            break
    return out


def measure(
    searcher: Searcher, texts: list[str], vecs: np.ndarray
) -> dict[str, tuple[float, float]]:
    res = {}
    for mode in (Mode.VECTOR, Mode.TEXT, Mode.HYBRID):
        times = []
        for text, vec in zip(texts, vecs, strict=True):
            t0 = time.perf_counter()
            searcher.search(text, vec, k=10, mode=mode)
            times.append((time.perf_counter() - t0) * 1000)
        res[mode.value] = (statistics.median(times), percentile(times, 95))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--source", type=Path, default=OUT / "index-300-w32")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()

    base = load_source(args.source)
    model_id = (base.schema.metadata or {}).get(b"codechunkd.embedding_model", b"").decode()
    window = int(model_id.rsplit("seq", 1)[-1]) if "seq" in model_id else 256
    settings = load_settings(env={"CODECHUNKD_EMBEDDING_MAX_SEQ_LENGTH": str(window)})
    embedder = make_embedder(settings.embedding)
    texts = queries(base, args.queries)
    t0 = time.perf_counter()
    vecs = embedder.embed(texts)
    embed_ms = (time.perf_counter() - t0) * 1000 / len(texts)
    print(f"source: {args.source} ({base.num_rows} real rows, model {model_id})")
    print(f"{len(texts)} queries; query embedding {embed_ms:.1f} ms each (excluded below)\n")
    rng = np.random.default_rng(7)
    print(
        f"{'rows':>9} {'index':<10} {'vector p50/p95':>16} {'text p50/p95':>16} {'hybrid p50/p95':>16}"
    )
    for n in (int(s) for s in args.sizes.split(",")):
        path = OUT / f"query-{n}"
        shutil.rmtree(path, ignore_errors=True)
        store = IndexStore(str(path))
        db = lancedb.connect(str(path), read_consistency_interval=timedelta(0))
        table = scaled(base, n, rng)
        tbl = db.create_table(CHUNKS, schema=base.schema)
        for batch in table.to_batches(max_chunksize=50_000):
            tbl.add(pa.Table.from_batches([batch]))
        tbl.optimize()
        store.ensure_fts()
        searcher = Searcher(store)
        searcher.search(texts[0], vecs[0], k=10)  # warm caches
        for label, row in [("none", measure(searcher, texts, vecs))]:
            cells = [f"{row[m][0]:7.1f}/{row[m][1]:7.1f}" for m in ("vector", "text", "hybrid")]
            print(f"{n:>9} {label:<10} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16}", flush=True)
        t0 = time.perf_counter()
        store.build_vector_index()
        build = time.perf_counter() - t0
        searcher.search(texts[0], vecs[0], k=10)
        row = measure(searcher, texts, vecs)
        cells = [f"{row[m][0]:7.1f}/{row[m][1]:7.1f}" for m in ("vector", "text", "hybrid")]
        print(
            f"{n:>9} {'IVF-PQ':<10} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16}"
            f"   (index built in {build:.0f} s)",
            flush=True,
        )
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()

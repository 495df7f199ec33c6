"""Latency of the MCP ``definition`` and ``references`` tools on a large index (median, p95).

    PYTHONPATH=src .venv/bin/python bench/refs_query.py                  # the stdlib, >= 30k chunks
    PYTHONPATH=src .venv/bin/python bench/refs_query.py --index /tmp/ix --queries 300
    PYTHONPATH=src .venv/bin/python bench/refs_query.py --index /tmp/go --lib GOROOT/src --ext .go

The index holds the Python standard library (real code nobody here wrote), chunked and
written as the indexer writes it (``IndexStore.write_batch``: chunks, references, files),
except that the vectors are random unit vectors: these tools never read them, and the real
model would take an hour to embed this many chunks on this machine. The client is the MCP
SDK's own, over stdio, spawning ``codechunkd mcp`` as an agent does.  The ``references``
table gets the BTrees the writer's upkeep keeps on it (``ensure_reference_indexes``).
After one untimed call of each tool (the server opens the index and reads the definitions,
imports and bases of the reference graph), ``--queries`` names drawn at random (seed 31)
from the index's definitions are asked of each tool.
Printed figures only.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import sysconfig
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# as in bench/mcp.py: this folder first on sys.path would shadow the MCP SDK
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402
import numpy as np  # noqa: E402

from mcp.client.session import ClientSession  # noqa: E402  # isort: skip
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402  # isort: skip

EXE = str(Path(sys.executable).parent / "codechunkd")
DIM = 384


def indexed_file(rel: str, data: bytes, rng: np.random.Generator, dim: int = DIM) -> Any:
    """The file ``rel`` chunked as the indexer chunks it, each chunk with a random unit
    vector of ``dim`` (an ``IndexedFile`` for ``IndexStore.write_batch``)."""
    from codechunkd.chunking.chunker import chunk
    from codechunkd.storage.rows import EmbeddedChunk, IndexedFile

    chunks = chunk(rel, data)
    language = chunks[0].language if chunks else "text"
    vecs = rng.standard_normal((len(chunks), dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ready = tuple(
        EmbeddedChunk(
            chunk=c,
            vector=v,
            embed_hash=c.content_hash,
            embedded_tokens=c.token_count,
            summary="",
            summary_source="extractive",
            summary_of=c.content_hash,
        )
        for c, v in zip(chunks, vecs, strict=True)
    )
    return IndexedFile(path=rel, blob="0" * 40, language=language, dirty=False, chunks=ready)


def build(index: Path, lib: Path, ext: str = ".py") -> int:
    """Chunk every ``ext`` file under ``lib`` (the stdlib's modules, by default) into
    ``index``, ``site-packages`` and ``testdata`` left out; returns the chunk rows."""
    from codechunkd.storage.store import IndexStore

    store = IndexStore(str(index))
    store.ensure_writable("bench-random", DIM)
    source = SimpleNamespace(id="stdlib", repo=str(lib))
    head = SimpleNamespace(branch="main", commit=None)
    rng = np.random.default_rng(31)
    skip = {"site-packages", "testdata"}
    paths = [p for p in sorted(lib.rglob(f"*{ext}")) if not skip & set(p.parts)]
    batch: list[Any] = []
    total = 0
    for path in paths:
        rel = path.relative_to(lib).as_posix()
        try:
            batch.append(indexed_file(rel, path.read_bytes(), rng))
        except Exception:  # noqa: S112 - a bench: a file that fails is left out
            continue
        total += len(batch[-1].chunks)
        if len(batch) >= 200:
            store.write_batch(source, head, batch, [], model_id="bench-random", new=True)  # type: ignore[arg-type]
            batch = []
    if batch:
        store.write_batch(source, head, batch, [], model_id="bench-random", new=True)  # type: ignore[arg-type]
    return total


def names(index: Path, n: int) -> list[str]:
    from codechunkd.storage.reader import open_index

    graph = open_index(str(index)).refs.graph()
    rows = sorted({graph.definition(i).symbol for v in graph.defs_by_name.values() for i in v})
    return random.Random(31).sample(rows, min(n, len(rows)))


async def measure(index: Path, queries: list[str]) -> dict[str, list[float]]:
    params = StdioServerParameters(
        command=EXE,
        args=["mcp", "--index-dir", str(index)],
        env=dict(os.environ, LANCEDB_LOG="error"),
    )
    out: dict[str, list[float]] = {"definition": [], "references": []}
    with open(os.devnull, "w") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            for tool in out:  # untimed: the server opens the index and builds the graph
                await s.call_tool(tool, {"name": queries[0]})
            for q in queries:
                for tool, times in out.items():
                    t = time.perf_counter()
                    res = await s.call_tool(tool, {"name": q})
                    times.append(time.perf_counter() - t)
                    assert not res.is_error, res
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--index", type=Path, default=Path("/tmp/codechunkd-bench-refs/index"))
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--lib", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    ap.add_argument("--ext", default=".py", help="the files of --lib to index (.go: Go's)")
    args = ap.parse_args()
    if not (args.index / "chunks.lance").is_dir():
        t = time.monotonic()
        rows = build(args.index, args.lib, args.ext)
        print(f"built {args.index}: {rows:,} chunks in {time.monotonic() - t:.0f} s")
    from codechunkd.storage.store import IndexStore

    store = IndexStore(str(args.index))
    if hasattr(store, "ensure_reference_indexes"):  # as the writer's upkeep keeps them
        store.ensure_reference_indexes()
    print(
        f"index: {store.rows():,} chunks, {store.db.open_table('references').count_rows():,} references"
    )
    queries = names(args.index, args.queries)
    times = anyio.run(measure, args.index, queries)
    for tool, ts in times.items():
        ms = sorted(x * 1000 for x in ts)
        p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
        print(f"{tool:<11} n={len(ms)}  median {statistics.median(ms):.1f} ms  p95 {p95:.1f} ms")


if __name__ == "__main__":
    main()

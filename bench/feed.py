"""Does chunking feed a fast embedder?  A cold index with 1 vs N chunking processes.

``index.chunk_workers`` (issue #20) moves decoding and chunking onto worker processes.
That only pays when the embedder is faster than one chunking thread: here the embedder is
the product's ``remote`` backend against bench/cold.py's stand-in ``/v1/embeddings``
server on 127.0.0.1 (hash vectors, no model), so what is left is the pipeline itself:
reading blobs, chunking, token counts, the cache, LanceDB writes.  Each run is a real
``codechunkd index`` in a child process on the same repository of real standard-library
modules, the settings alternating between runs so drift hits both alike.

The stand-in server runs in this process and its JSON costs CPU too: on a 2-core box
three things share two cores, so the ratio there is a floor of what a machine whose
embedder is elsewhere (a GPU, a server) sees.

    .venv/bin/python bench/feed.py --files 600 --workers 1,2 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cold import OUT, code_pool, cold_index, make_repo_tree, standin_server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=600, help="standard-library modules indexed")
    ap.add_argument("--workers", default="1,2", help="index.chunk_workers values to compare")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each setting, alternating")
    args = ap.parse_args()

    files = [(f, rel) for f, rel in code_pool() if rel.startswith("stdlib/")][: args.files]
    repo = make_repo_tree(files, f"feed-repo-{len(files)}")
    mb = sum(f.stat().st_size for f, _ in files) / 1e6
    settings = [int(w) for w in args.workers.split(",")]
    print(f"{len(files)} stdlib files, {mb:.1f} MB, remote backend on a stand-in server")
    walls: dict[int, list[float]] = {w: [] for w in settings}
    syncs: dict[int, list[float]] = {w: [] for w in settings}
    chunks = 0
    with standin_server() as env:
        for _ in range(args.rounds):
            for w in settings:
                run_env = dict(env, CODECHUNKD_INDEX_CHUNK_WORKERS=str(w))
                report, wall, rss = cold_index(repo, OUT / f"feed-index-{w}", run_env)
                chunks = int(report["chunks"])  # type: ignore[call-overload]
                walls[w].append(wall)
                syncs[w].append(float(report["seconds"]))  # type: ignore[arg-type]
                print(
                    f"  chunk_workers={w}: {wall:6.2f} s wall (sync {syncs[w][-1]:.2f} s), "
                    f"{len(files) / wall:6.1f} files/s, {chunks / wall:7.1f} chunks/s, "
                    f"{mb / syncs[w][-1]:.2f} MB/s in the sync, peak RSS {rss:.0f} MiB"
                )
    print(f"median of {args.rounds} (files/s, chunks/s over the command's wall time):")
    base = statistics.median(walls[settings[0]])
    for w in settings:
        wall = statistics.median(walls[w])
        print(
            f"  chunk_workers={w}: {len(files) / wall:6.1f} files/s, {chunks / wall:7.1f} "
            f"chunks/s, sync {statistics.median(syncs[w]):.2f} s, {base / wall:.2f}x "
            f"chunk_workers={settings[0]}"
        )


if __name__ == "__main__":
    main()

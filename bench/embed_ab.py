"""Before/after of the embedding paths on this machine: REV's ``OnnxEmbedder`` and
``LockedEmbedder`` against the working tree's, in one process, alternating (#20).

    .venv/bin/python bench/embed_ab.py --base d12fdbb [--rounds 8] [--n 160]

For each fixed layout (1 session x 1 thread, 2 sessions x 1 thread) it times one ``embed``
call of ``--n`` real stdlib functions (the one-shot ``codechunkd index`` path) and the same
texts through ``LockedEmbedder`` (the daemon's slices), before and after in turn, and prints
the median speeds and their ratio after/before.  Layouts are fixed so that calibration's own
noise does not pick different ones for the two sides.  Run it on a quiet machine: a shared
one moves single runs by 2x.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from codechunkd.config.settings import EmbeddingSettings
from codechunkd.daemon import embedder_lock as new_service
from codechunkd.embedding import embed_onnx as new_onnx
from embedding import stdlib_functions  # bench/embedding.py, next to this file

ROOT = Path(__file__).resolve().parent.parent


def load_at(rev: str, path: str, name: str, tmp: Path) -> ModuleType:
    """``path`` as it is at ``rev``, imported as module ``name``."""
    source = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    file = tmp / f"{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--base", required=True, help="the revision to compare against")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--n", type=int, default=160, help="texts per call")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old_onnx = load_at(
            args.base, "src/codechunkd/embedding/embed_onnx.py", "old_onnx", Path(tmp)
        )
        old_service = load_at(
            args.base, "src/codechunkd/daemon/service.py", "old_service", Path(tmp)
        )
    texts = stdlib_functions(args.n)
    for sessions, threads in ((1, 1), (2, 1)):
        settings = EmbeddingSettings(sessions=sessions, threads=threads)
        sides: dict[str, tuple[Any, Any]] = {}
        for tag, onnx, service in (
            ("before", old_onnx, old_service),
            ("after", new_onnx, new_service),
        ):
            embedder = onnx.OnnxEmbedder(settings)
            embedder.load()
            embedder.embed(texts[:8])
            sides[tag] = (embedder, service.LockedEmbedder(embedder))
        times: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
        for r in range(args.rounds):
            for tag in ("before", "after") if r % 2 == 0 else ("after", "before"):
                embedder, locked = sides[tag]
                t0 = time.perf_counter()
                embedder.embed(texts)
                t1 = time.perf_counter()
                locked.embed(texts)
                times[tag].append((t1 - t0, time.perf_counter() - t1))
        for i, name in enumerate(("one call", "daemon slices")):
            before = statistics.median(t[i] for t in times["before"])
            after = statistics.median(t[i] for t in times["after"])
            print(
                f"{sessions}x{threads} {name:14} before {len(texts) / before:6.1f} texts/s, "
                f"after {len(texts) / after:6.1f}; after/before {before / after:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""How batches are cut for parallel sessions: the critical path in padded tokens (#20).

    .venv/bin/python bench/padding.py                    # stdlib chunks, 2 sessions, slices of 16
    .venv/bin/python bench/padding.py --sessions 4 --slice 64

Wall time on a shared 2-core box is too noisy to tell a 10% change, so this counts work
instead: the daemon's slices (``--slice`` texts of real stdlib chunks, in index order) are cut
for ``--sessions`` parallel sessions the old way (equal counts of length-sorted texts) and
the new way (``length_batches``: one batch per session of about equal tokens), and the
bench sums, over slices, the slowest session's padded tokens (count x longest) and padded
attention work (count x longest^2).  A call lasts as long as its slowest session, so a ratio
below 1 means less wall time on any machine.  Deterministic: the same figures every run.
"""

from __future__ import annotations

import argparse
import math
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer

from codechunkd.chunking.chunker import chunk
from codechunkd.embedding.batching import length_batches
from codechunkd.embedding.models import bundled_model_path


def stdlib_chunks(files: int) -> list[str]:
    """Chunk texts of the first ``files`` top-level stdlib modules, in index order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    for path in sorted(root.glob("*.py"))[:files]:
        texts += [c.content for c in chunk(str(path), path.read_bytes())]
    return texts


def equal_counts(lengths: Sequence[int], sessions: int) -> list[list[int]]:
    """The old cut: length-sorted texts in ``sessions`` runs of equal count."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    size = -(-len(order) // sessions)
    return [order[s : s + size] for s in range(0, len(order), size)]


def critical(batches: list[list[int]], lengths: Sequence[int], power: int) -> int:
    """The slowest session's padded work (each session runs one batch here)."""
    return max(len(b) * math.prod([max(lengths[i] for i in b)] * power) for b in batches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--files", type=int, default=120, help="stdlib modules to chunk")
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--slice", type=int, default=16, help="texts per daemon slice")
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    if args.slice > args.sessions * args.batch_size:
        ap.error("--slice must fit in one batch per session (--sessions x --batch-size)")
    tokenizer = Tokenizer.from_file(str(bundled_model_path() / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    texts = stdlib_chunks(args.files)
    lengths = [len(e.ids) for e in tokenizer.encode_batch(texts)]
    n = args.slice
    slices = [lengths[s : s + n] for s in range(0, len(lengths) - n + 1, n)]
    print(f"{len(texts)} chunks, {len(slices)} slices of {n}, {args.sessions} sessions")
    for power, name in ((1, "padded tokens"), (2, "padded attention (tokens x length)")):
        old = sum(critical(equal_counts(sl, args.sessions), sl, power) for sl in slices)
        new = sum(
            critical(length_batches(sl, args.batch_size, workers=args.sessions), sl, power)
            for sl in slices
        )
        print(f"  {name:36} old {old:>13,}  new {new:>13,}  new/old {new / old:.3f}")


if __name__ == "__main__":
    main()

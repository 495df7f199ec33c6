"""Token counting: the tokenizer's encode_batch_fast against TokenCounter's fast path.

    .venv/bin/python bench/tokens.py                  # every .py file of the Python stdlib
    .venv/bin/python bench/tokens.py --root DIR --ext .js --piece 1500

Files are cut into ``--piece``-character texts.  Both paths count the same texts
in batches of 512; the figures are process CPU times of one run each (the fast
path starts with an empty word cache, and a second, warm run is shown too), the
ratio old/new, and how many counts differ (the fast path is meant to be exact).
"""

from __future__ import annotations

import argparse
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

from chunking import corpus  # bench/chunking.py, next to this file
from codechunkd.chunking.tokens import TokenCounter
from codechunkd.embedding.models import bundled_model_path


def texts_of(root: Path, ext: str, piece: int) -> list[str]:
    texts: list[str] = []
    for p in corpus([root], (ext,), None):  # bench/chunking.py's: site-packages left out
        try:
            src = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.extend(src[i : i + piece] for i in range(0, len(src), piece))
    return texts


def timed(count: Callable[[list[str]], list[int]], texts: list[str]) -> tuple[float, list[int]]:
    out: list[int] = []
    t0 = time.process_time()
    for i in range(0, len(texts), 512):
        out.extend(count(texts[i : i + 512]))
    return time.process_time() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    ap.add_argument("--ext", default=".py")
    ap.add_argument("--piece", type=int, default=1500)
    args = ap.parse_args()
    texts = texts_of(args.root, args.ext, args.piece)
    ascii_share = sum(t.isascii() for t in texts) / max(1, len(texts))
    print(
        f"{len(texts)} texts, {sum(map(len, texts)) / 1e6:.1f} M chars, "
        f"{100 * ascii_share:.1f}% ASCII, from {args.root}"
    )
    counter = TokenCounter(bundled_model_path() / "tokenizer.json")
    old = counter._encode  # the tokenizer's encode_batch_fast, what every text used to cost
    old_s, expected = timed(old, texts)
    new_s, got = timed(counter, texts)
    warm_s, _ = timed(counter, texts)
    mismatches = sum(a != b for a, b in zip(expected, got, strict=True))
    print(f"tokens: {sum(expected)}; mismatches: {mismatches} of {len(texts)} texts")
    print(f"old (encode_batch_fast): {old_s:6.2f} s CPU")
    print(f"new (cold word cache):   {new_s:6.2f} s CPU   old/new {old_s / new_s:5.1f}x")
    print(f"new (warm word cache):   {warm_s:6.2f} s CPU   old/new {old_s / warm_s:5.1f}x")


if __name__ == "__main__":
    main()

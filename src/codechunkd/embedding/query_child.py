"""One query vector from a child process, so that loading the model overlaps opening the index.

``codechunkd search`` without a daemon needs a model (onnxruntime session and
tokenizer) and LanceDB (its import), each a good part of a second or more.  Both are
mostly work that holds the GIL, so a thread does not overlap them; a child
process does, on the other core.  The child reads one JSON line (embedding
settings and the text) and writes the vector as float32 bytes; it never exports
a model (exit 3 when no export is cached).

:func:`start` launches the child first thing; :class:`ChildQueryEmbedder` reads
the vector when the search asks for that text.  Anything else, or a child that
failed, falls back to the in-process embedder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

from codechunkd.config.settings import EmbeddingSettings

if TYPE_CHECKING:
    from codechunkd.embedding.base import Embedder, Vectors

__all__ = ["ChildQueryEmbedder", "start"]

NO_EXPORT = 3


def start(settings: EmbeddingSettings, query: str) -> subprocess.Popen[bytes] | None:
    """Start computing ``query``'s vector in a child (light: no numpy, no model here)."""
    # one short text: one thread, and no calibration run in the child
    request = {"settings": asdict(replace(settings, threads=1)), "text": query}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "codechunkd.embedding.query_child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.close()
    except OSError:
        return None
    return proc


class ChildQueryEmbedder:
    """An :class:`Embedder` whose vector for ``query`` comes from a child process."""

    def __init__(self, inner: Embedder, proc: subprocess.Popen[bytes], query: str) -> None:
        self._inner = inner
        self._proc: subprocess.Popen[bytes] | None = proc
        self._query = query

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        if list(texts) == [self._query]:
            vector = self._take()
            if vector is not None:
                return vector.reshape(1, -1)
        return self._inner.embed(texts)

    def _take(self) -> Vectors | None:
        import numpy as np

        proc, self._proc = self._proc, None
        if proc is None or proc.stdout is None:
            return None
        data = proc.stdout.read()
        proc.stdout.close()
        if proc.wait() != 0 or not data or len(data) % 4:
            return None
        return np.frombuffer(data, dtype=np.float32)

    def close(self) -> None:
        """Stop the child if its vector was never read."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def main() -> int:
    import numpy as np

    from codechunkd.embedding.embed_onnx import OnnxEmbedder

    request = json.loads(sys.stdin.readline())
    embedder = OnnxEmbedder(EmbeddingSettings(**request["settings"]))
    if embedder.model_file is None:
        return NO_EXPORT
    vector = np.asarray(embedder.embed([request["text"]])[0], dtype=np.float32)
    sys.stdout.buffer.write(vector.tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())

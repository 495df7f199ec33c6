"""The query vector computed by a child process (``codechunkd search`` without a daemon)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding import query_child
from codechunkd.embedding.embed_onnx import OnnxEmbedder


def test_the_child_vector_is_the_in_process_vector(embedder) -> None:  # type: ignore[no-untyped-def]
    """The query child's vector equals the in-process one, and is used for its query only."""
    assert isinstance(embedder, OnnxEmbedder)
    embedder.embed(["export the model first"])  # the child only runs cached exports
    settings = embedder._settings
    query = "read the settings file and apply environment overrides"
    proc = query_child.start(settings, query)
    assert proc is not None
    child = query_child.ChildQueryEmbedder(embedder, proc, query)
    got = child.embed([query])
    want = embedder.embed([query])
    assert got.shape == want.shape == (1, embedder.dimension)
    assert float(got[0] @ want[0]) > 0.9999
    # the vector is read once; other texts come from the in-process embedder
    other = child.embed(["another text"])
    assert np.allclose(other, embedder.embed(["another text"]))


def test_without_a_cached_export_the_child_declines_and_search_falls_back(
    embedder,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """Without a cached ONNX export the child exits with NO_EXPORT, exports nothing,
    and the query is embedded in process instead."""
    empty = EmbeddingSettings(onnx_dir=str(tmp_path / "no-exports"))
    proc = query_child.start(empty, "q")
    assert proc is not None
    assert proc.wait(timeout=60) == query_child.NO_EXPORT
    assert not (tmp_path / "no-exports").exists() or not any((tmp_path / "no-exports").iterdir())
    child = query_child.ChildQueryEmbedder(embedder, proc, "q")
    assert np.allclose(child.embed(["q"]), embedder.embed(["q"]))


def test_close_stops_a_child_whose_vector_was_never_read(embedder) -> None:  # type: ignore[no-untyped-def]
    """Closing an unread query child ends its process (no orphan)."""
    proc = query_child.start(embedder._settings, "never read")
    assert proc is not None
    query_child.ChildQueryEmbedder(embedder, proc, "never read").close()
    assert proc.poll() is not None

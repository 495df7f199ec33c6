"""The daemon's shared model: slices that keep every onnx session busy, searches in between."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import wait_for

from codechunkd.config.settings import EmbeddingSettings
from codechunkd.daemon.embedder_lock import LockedEmbedder
from codechunkd.embedding.embed_onnx import OnnxEmbedder

TEXTS = [f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(40)]


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory: pytest.TempPathFactory) -> OnnxEmbedder:
    """The real bundled model, two one-thread sessions, batches of 4 (small, fast slices)."""
    onnx_dir = Path(tmp_path_factory.getbasetemp()) / "onnx-models"  # shared with conftest's
    settings = EmbeddingSettings(onnx_dir=str(onnx_dir), sessions=2, threads=1, batch_size=4)
    embedder = OnnxEmbedder(settings)
    embedder.load()
    return embedder


def test_every_slice_hands_each_session_work(two_sessions: OnnxEmbedder) -> None:
    """A slice is at least two texts per session, and each session runs a batch of it."""
    locked = LockedEmbedder(two_sessions, slice_size=1, slice_seconds=0)
    assert locked.slice_texts() == 4  # 2 sessions x 2 texts, however slow the model is
    before = list(two_sessions.session_batches)
    locked.embed(TEXTS[:4])
    assert [b - a for a, b in zip(before, two_sessions.session_batches, strict=True)] == [1, 1]

    before = list(two_sessions.session_batches)
    slices = locked.slices
    vectors = locked.embed(TEXTS)
    done = locked.slices - slices
    assert done == len(TEXTS) // 4
    assert [b - a for a, b in zip(before, two_sessions.session_batches, strict=True)] == [done] * 2
    np.testing.assert_allclose(vectors, two_sessions.embed(TEXTS), atol=1e-5)


def test_slices_grow_to_a_full_batch_per_session(two_sessions: OnnxEmbedder) -> None:
    """Once the speed is measured, a slice carries what runs in ``slice_seconds``, up to one
    full batch for every session (2 x 4 here), never fewer than two texts per session."""
    locked = LockedEmbedder(two_sessions, slice_size=1, slice_seconds=3600)
    locked.embed(TEXTS[:8])
    assert locked.texts_per_s > 0
    assert locked.slice_texts() == 8
    locked.slice_seconds = 0
    assert locked.slice_texts() == 4


def test_a_search_waits_for_at_most_one_slice(two_sessions: OnnxEmbedder) -> None:
    """While the writer embeds many slices, a query is answered after the slice in flight."""
    locked = LockedEmbedder(two_sessions, slice_size=1, slice_seconds=0)
    writer_vectors: list[np.ndarray] = []
    bulk = [f"{t}# copy {n}\n" for n in range(5) for t in TEXTS]
    writer = threading.Thread(target=lambda: writer_vectors.append(locked.embed(bulk)))
    writer.start()
    try:
        wait_for(lambda: locked.slices >= 1, "the writer's first slice")
        query = locked.embed(["respond to a request"])
        answered_at = locked.slices
        assert locked.waited_slices <= 1
        assert answered_at < len(bulk) // 4, "the query waited for the whole bulk call"
    finally:
        writer.join()
    assert query.shape == (1, two_sessions.dimension)
    assert writer_vectors[0].shape == (len(bulk), two_sessions.dimension)

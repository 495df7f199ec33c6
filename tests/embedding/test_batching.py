"""Length-bucketed batches (torch-free): what the onnx sessions and a GPU are fed."""

from __future__ import annotations

import random

import pytest

from codechunkd.embedding.batching import length_batches


def test_batches_are_sorted_full_and_cover_every_text_once() -> None:
    """Texts are grouped by token count into batches of ``batch_size``, each text once."""
    rng = random.Random(7)
    lengths = [rng.randint(3, 256) for _ in range(1000)]
    batches = length_batches(lengths, 32)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert [len(b) for b in batches] == [32] * 31 + [8]
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat)  # shortest batch first, so padding is small


def test_padded_tokens_bound_batches_of_long_texts() -> None:
    """With ``max_tokens`` (a GPU's memory), long texts go in smaller batches, short in full."""
    lengths = [10] * 100 + [256] * 100
    batches = length_batches(lengths, 64, max_tokens=64 * 64)
    for b in batches:
        assert len(b) <= 64
        assert len(b) * max(lengths[i] for i in b) <= 64 * 64
    assert max(len(b) for b in batches if lengths[b[0]] == 256) == 16
    assert [len(b) for b in batches if lengths[b[0]] == 10] == [64, 36]


def test_one_round_gives_each_worker_one_batch() -> None:
    """Fewer texts than one full batch per worker: one batch per worker, of equal counts of
    length-sorted texts (the shortest together), every text once."""
    lengths = [200] * 10 + [8] * 30
    batches = length_batches(lengths, 32, workers=4)
    assert [len(b) for b in batches] == [10, 10, 10, 10]
    assert {lengths[i] for i in batches[0]} == {8} and {lengths[i] for i in batches[3]} == {200}
    assert sorted(i for b in batches for i in b) == list(range(40))


def test_one_batch_per_worker_still_keeps_to_the_padded_tokens() -> None:
    """Few long texts for the workers: batches stay within ``max_tokens`` (a CPU session's
    memory) rather than one large batch per worker."""
    lengths = [256] * 10 + [8] * 4
    batches = length_batches(lengths, 32, workers=2, max_tokens=1024)
    assert all(len(b) * max(lengths[i] for i in b) <= 1024 for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(14))
    assert len(length_batches([8] * 14, 32, workers=2, max_tokens=1024)) == 2  # one each


def test_every_worker_gets_a_text_when_there_are_few() -> None:
    """As many batches as workers (or texts, when fewer), none empty."""
    assert len(length_batches([5, 300, 7], 32, workers=2)) == 2
    assert [len(b) for b in length_batches([5, 300, 7], 32, workers=8)] == [1, 1, 1]
    assert length_batches([], 32, workers=4) == []


def test_bad_sizes_are_refused() -> None:
    """A zero batch size is a programming error, said at once."""
    with pytest.raises(ValueError, match="positive"):
        length_batches([1], 0)

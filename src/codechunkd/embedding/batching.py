"""Length-bucketed batches: which texts go through the model together (no ML import).

Texts are sorted by token count, so a batch pads its texts to a length close to their
own; the work left is then handed out longest first.  Both local backends use it: the
onnx one for its sessions, the torch one for a GPU's large batches.
"""

from __future__ import annotations

from collections.abc import Sequence

CPU_BATCH_TOKENS = 1024
"""A CPU batch's padded tokens, at most (4 texts of 256): attention's work and memory grow
with count x length squared, and onnxruntime's arena keeps the largest batch a session
ran.  On 2 cores, 600 stdlib chunks in batches of 32 against capped: onnx (one session of
2 threads) 37 against 40-43 texts/s and a peak RSS of 665 against 256 MiB (512 tokens:
218 MiB, no faster); torch 30-34 against 37-38 texts/s, 920 against 798 MiB.  Short texts
still go ``embedding.batch_size`` at a time."""


def length_batches(
    lengths: Sequence[int], batch_size: int, *, workers: int = 1, max_tokens: int = 0
) -> list[list[int]]:
    """Indices of the texts of token counts ``lengths``, in batches, shortest batch first.

    Batches hold at most ``batch_size`` texts and, when ``max_tokens`` is set, at most that
    many padded tokens (count x longest: a GPU batch of long texts stays in memory while one
    of short texts stays large).  When there are fewer texts than ``workers`` full batches,
    they are cut into one batch per worker of equal counts instead, so that every worker has
    one, unless such a batch would pass ``max_tokens``.  (Cuts of equal tokens looked
    better on paper, 0.86x the padded work of the slowest worker, but ran the daemon's
    16-text slices on 2 sessions at 0.85x the speed of equal counts on 2 quiet cores:
    measured, not kept.)
    """
    if batch_size < 1 or workers < 1:
        raise ValueError(f"batch_size and workers must be positive ({batch_size}, {workers})")
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    if not order:
        return []
    if workers > 1 and len(order) < workers * batch_size:
        size = -(-len(order) // min(workers, len(order)))  # one batch per worker
        cuts = [order[s : s + size] for s in range(0, len(order), size)]
        if not max_tokens or all(len(b) * lengths[b[-1]] <= max_tokens for b in cuts):
            return cuts
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = max(1, lengths[i])  # sorted: the newcomer is the longest
        full = len(current) == batch_size
        if current and (full or (max_tokens and (len(current) + 1) * longest > max_tokens)):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches

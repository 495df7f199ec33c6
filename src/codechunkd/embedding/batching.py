"""Length-bucketed batches: which texts go through the model together (no ML import).

Texts are sorted by token count, so a batch pads its texts to a length close to their
own; the work left is then handed out longest first.  Both local backends use it: the
onnx one for its sessions, the torch one for a GPU's large batches.
"""

from __future__ import annotations

from collections.abc import Sequence


def length_batches(
    lengths: Sequence[int], batch_size: int, *, workers: int = 1, max_tokens: int = 0
) -> list[list[int]]:
    """Indices of the texts of token counts ``lengths``, in batches, shortest batch first.

    Batches hold at most ``batch_size`` texts and, when ``max_tokens`` is set, at most that
    many padded tokens (count x longest: a GPU batch of long texts stays in memory while one
    of short texts stays large).  When there are fewer texts than ``workers`` full batches,
    they are cut into one batch per worker of about equal tokens instead, so that one round
    keeps every worker busy for about the same time (equal counts would leave the worker with
    the longest texts running alone).
    """
    if batch_size < 1 or workers < 1:
        raise ValueError(f"batch_size and workers must be positive ({batch_size}, {workers})")
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    if workers > 1 and len(order) < workers * batch_size:
        return _equal_token_cuts(order, lengths, min(workers, len(order)))
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


def _equal_token_cuts(order: list[int], lengths: Sequence[int], parts: int) -> list[list[int]]:
    """``order`` cut into ``parts`` non-empty runs of about equal total tokens."""
    total = sum(max(1, lengths[i]) for i in order)
    cuts: list[list[int]] = []
    current: list[int] = []
    done = 0
    for pos, i in enumerate(order):
        current.append(i)
        done += max(1, lengths[i])
        left_parts = parts - len(cuts) - 1  # runs still to fill after this one
        left_texts = len(order) - pos - 1
        if left_parts and (done >= total * (len(cuts) + 1) / parts or left_texts == left_parts):
            cuts.append(current)
            current = []
    if current:
        cuts.append(current)
    return cuts

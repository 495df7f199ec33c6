"""One file read, decoded, its language detected and chunked: the step sync and verify share.

``verify`` recomputes what ``sync`` should have written; both go through
``prepare_file`` so a file is skipped, decoded and chunked the same way by
both, and a difference between them is a real difference in the index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codechunkd.chunking.chunker import Chunk, CountTokens, chunk
from codechunkd.chunking.languages import detect_language
from codechunkd.chunking.tokens import counter_for
from codechunkd.config.settings import Settings
from codechunkd.git.changes import FileVersion, GitSource
from codechunkd.git.files import as_text, generated, is_data, read_raw


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """A file's chunks, or the reason it has none."""

    version: FileVersion
    """The version actually read (a dirty file may have changed since its status)."""
    language: str = ""
    chunks: list[Chunk] = field(default_factory=list)
    skip_reason: str | None = None
    replaced_utf8: bool = False
    """The file was not valid UTF-8 and was decoded with replacement characters."""
    error: str | None = None
    """Why chunking failed (``skip_reason`` is then ``chunking_failed``)."""


def prepare_file(
    git: GitSource, version: FileVersion, settings: Settings, count_tokens: CountTokens
) -> Prepared:
    """Read, decode, detect and chunk one file; a bad file is a skip, never an exception."""
    version, raw = read_raw(
        git,
        version,
        max_size=settings.files.max_file_size,
        skip_lock_files=settings.files.skip_generated,
    )
    if isinstance(raw, str):
        return Prepared(version=version, skip_reason=raw)
    return prepare_bytes(version, raw, settings, count_tokens)


def prepare_bytes(
    version: FileVersion, raw: bytes, settings: Settings, count_tokens: CountTokens
) -> Prepared:
    """Decode, detect and chunk a file's bytes as read: the half of ``prepare_file`` that
    needs no repository, so that worker processes run exactly the same decisions."""
    text = as_text(raw, max_size=settings.files.max_file_size)
    if isinstance(text, str):
        return Prepared(version=version, skip_reason=text)
    path, data = version.path, text.data
    build_output = generated(path, data) if settings.files.skip_generated else None
    if build_output:
        return Prepared(version=version, skip_reason=build_output)
    if settings.files.skip_data and is_data(path, len(data)):
        return Prepared(version=version, skip_reason="data")
    language = detect_language(path, data, settings.chunking.extensions)
    try:
        chunks = chunk(path, data, settings.chunking, language=language, count_tokens=count_tokens)
    except Exception as exc:  # noqa: BLE001 - one bad file is a counted skip, not a crash
        return Prepared(
            version=version,
            skip_reason="chunking_failed",
            replaced_utf8=text.replaced,
            error=repr(exc),
        )
    return Prepared(version=version, language=language, chunks=chunks, replaced_utf8=text.replaced)


def prepare_many(files: list[tuple[FileVersion, bytes]], settings: Settings) -> list[Prepared]:
    """``prepare_bytes`` over files read by the parent: the task a chunking worker process
    runs (module-level, so picklable); the token counter is the model's own, loaded once per
    process (``counter_for`` is cached), as ``Syncer`` uses."""
    count_tokens = counter_for(settings.embedding.model)
    return [prepare_bytes(version, raw, settings, count_tokens) for version, raw in files]

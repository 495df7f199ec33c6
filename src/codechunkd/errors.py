"""Every error codechunkd raises on purpose.

::

    CodechunkdError
    ├── ConfigError            a setting is unknown, mistyped or out of range
    ├── RepoError              git could not give us what we asked for
    │   ├── NotAGitRepo
    │   └── RefNotFound
    ├── ChunkingError
    │   └── UnsupportedLanguage
    ├── StoreError             the index directory cannot be used as asked
    │   ├── SchemaMismatch     the table was written by another schema version
    │   ├── ModelMismatch      the table holds vectors of another embedding model
    │   ├── IndexDamaged       a file of the index is missing or unreadable: rebuild it
    │   └── IndexLocked        another writer holds the index directory
    ├── EmbeddingError         the embedding backend failed
    └── SummaryError           the summary (chat-completions) endpoint failed
        ├── EndpointUnavailable    refused, timed out, rate limited or 5xx after retries
        └── BadAnswer              malformed, cut short, or not a usable summary

Errors of the libraries underneath (pygit2, LanceDB, tree-sitter) are translated
at the boundary, once, with ``raise ... from exc``: callers never catch
``pygit2.GitError``.  Each error carries the facts as fields so that ``status``
and the CLI can print them; the CLI maps classes to exit codes (see ``cli/__init__.py``).
"""

from __future__ import annotations


class CodechunkdError(Exception):
    """Root of all codechunkd errors."""

    exit_code = 1


class ConfigError(CodechunkdError):
    """A setting is unknown, has the wrong type, or an invalid value."""

    exit_code = 2

    def __init__(self, message: str, *, key: str | None = None, origin: str | None = None) -> None:
        self.key = key
        self.origin = origin
        where = f" (in {origin})" if origin else ""
        super().__init__(f"{message}{where}")


class RepoError(CodechunkdError):
    """git could not give us what we asked for."""

    exit_code = 3


class NotAGitRepo(RepoError):
    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"not inside a git repository: {path}")


class SourceMissing(RepoError):
    """A source's repository is no longer where it was indexed from (moved or deleted)."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        super().__init__(
            f"{repo}: the repository is gone (moved or deleted?); what was indexed stays "
            f"searchable: put it back, or `codechunkd remove {repo}` and add its new place"
        )


class RefNotFound(RepoError):
    def __init__(self, repo: str, ref: str) -> None:
        self.repo = repo
        self.ref = ref
        super().__init__(f"ref {ref!r} not found in {repo}")


class ChunkingError(CodechunkdError):
    """A file could not be chunked."""


class UnsupportedLanguage(ChunkingError):
    def __init__(self, language: str) -> None:
        self.language = language
        super().__init__(f"no grammar for language {language!r}")


class StoreError(CodechunkdError):
    """The index directory cannot be used as asked."""

    exit_code = 4


class SchemaMismatch(StoreError):
    def __init__(
        self, table: str, found: int, expected: int, *, found_columns: list[str] | None = None
    ) -> None:
        self.table = table
        self.found = found
        self.expected = expected
        what = f"schema version {found}"
        if found_columns is not None:
            what = f"other columns than schema version {expected} ({len(found_columns)} columns)"
        super().__init__(
            f"table {table!r} has {what}, this codechunkd expects schema version {expected}; "
            "run `codechunkd index --rebuild` to rebuild it"
        )


class ModelMismatch(StoreError):
    def __init__(self, found: str, expected: str, found_dim: int, expected_dim: int) -> None:
        self.found = found
        self.expected = expected
        super().__init__(
            f"the index holds vectors of {found} ({found_dim} dims) but the configured model is "
            f"{expected} ({expected_dim} dims); use another --index-dir, configure "
            "the same model, or run `codechunkd index --rebuild`"
        )


class IndexDamaged(StoreError):
    """A table, a data file or an index of the index directory is missing or unreadable.

    The index is derived data: ``codechunkd index --rebuild`` moves aside or drops what
    it cannot open and indexes again (cached vectors are reused).
    """

    exit_code = 8
    HINT = "run `codechunkd index --rebuild` to repair it"

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"the index is damaged: {what}; {self.HINT}")


class IndexLocked(StoreError):
    exit_code = 5

    def __init__(self, path: str, pid: int | None) -> None:
        self.path = path
        self.pid = pid
        holder = f"process {pid}" if pid else "another process"
        super().__init__(f"{path} is being written by {holder}")


class EmbeddingError(CodechunkdError):
    """The embedding backend failed."""

    exit_code = 6


class SummaryError(CodechunkdError):
    """The summary (chat-completions) endpoint failed."""

    exit_code = 7


class EndpointUnavailable(SummaryError):
    """The endpoint could not be reached or kept failing; ``retry_after`` is its hint, if any."""

    def __init__(self, url: str, reason: str, *, retry_after: float | None = None) -> None:
        self.url = url
        self.reason = reason
        self.retry_after = retry_after
        super().__init__(f"summary endpoint {url}: {reason}")


class BadAnswer(SummaryError):
    """One answer was malformed, cut short, or not a usable summary (never stored)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"unusable summary answer: {reason}")

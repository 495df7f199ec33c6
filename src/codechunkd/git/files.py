"""What a file's bytes are fit for: one decision shared by indexing and verification."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from codechunkd.git.changes import UNREADABLE, Entry, FileVersion, GitSource, blob_id

#: git's own heuristic: a NUL byte in the first 8000 bytes makes a file binary.
BINARY_SNIFF = 8000


@dataclass(frozen=True, slots=True, kw_only=True)
class Text:
    """A file that can be chunked: its bytes, valid UTF-8."""

    data: bytes
    replaced: bool
    """True when the file was not valid UTF-8 and was decoded with U+FFFD replacements."""


#: A line longer than this is not written by hand (minified code, an inlined blob).
MINIFIED_LINE = 500
#: Minified: at least this share of a JavaScript or CSS file's bytes in such lines (a
#: hand-written file with one long regex or data line stays well below: the highest among
#: 1,086 files of npm's dependencies, the bench corpora and the venv was 0.59, the lowest
#: minified one 0.92).
MINIFIED_SHARE = 0.8
#: Smaller files are left alone: little to lose by indexing them, and a short file with
#: one long line is often hand-written.
MINIFIED_MIN_BYTES = 2048
_MINIFIABLE = (".js", ".mjs", ".cjs", ".css")
_MINIFIED_NAMES = (".min.js", ".min.mjs", ".min.cjs", ".min.css")
_COMPILABLE = (*_MINIFIABLE, ".d.ts", ".d.mts", ".d.cts")  # tsc's declarations, too
#: A source map: a JSON object whose "version" key, 3, comes first (as in all 1,021 source
#: maps found here), not any JSON with a "mappings" key (a search engine's field mappings).
_SOURCE_MAP = re.compile(rb'\s*\{\s*"version"\s*:\s*3\b')
#: The last line a compiler or bundler writes after JavaScript or CSS made from other
#: sources (the source map spec's comment): ``//# sourceMappingURL=x.js.map``.
_COMPILED = re.compile(rb"\s*(?://|/\*)[#@] sourceMappingURL=")
#: A Git LFS pointer: what git holds of a file kept in LFS storage (its spec: under 1024
#: bytes, a first line naming the spec, then ``oid sha256:`` and ``size``; ``hawser`` is the
#: spec's first name). The file's content is elsewhere; the pointer says nothing.
_LFS_POINTER = re.compile(
    rb"version https://(?:git-lfs|hawser)\.github\.com/spec/v1\n(?:[a-z0-9.-]+ [^\n]*\n)*?"
    rb"oid sha256:[0-9a-f]{64}\n"
)
LFS_POINTER_MAX = 1024


#: Dependency lock files, by name: what a package manager writes about the versions it
#: resolved (GitHub's linguist calls them generated, too). The manifest beside each
#: (``package.json``, ``Cargo.toml``, ``go.mod``, ``pyproject.toml``) stays indexed.
LOCK_FILES = frozenset(
    {
        "package-lock.json",  # npm
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lock",
        "deno.lock",
        "cargo.lock",  # Rust
        "go.sum",  # Go: checksums of modules
        "gopkg.lock",
        "glide.lock",
        "poetry.lock",  # Python
        "pipfile.lock",
        "pdm.lock",
        "uv.lock",
        "pylock.toml",
        "composer.lock",  # PHP
        "gemfile.lock",  # Ruby
        "podfile.lock",  # CocoaPods
        "package.resolved",  # Swift
        "pubspec.lock",  # Dart
        "mix.lock",  # Elixir
        "flake.lock",  # Nix
        "packages.lock.json",  # NuGet
        "gradle.lockfile",
        ".terraform.lock.hcl",
    }
)
GENERATED_RULES = 3
"""Bumped when ``generated`` decides differently (2: lock files, 3: LFS pointers): part of
the index's fingerprint, so an index made under the old rules is re-planned once."""


DATA_NAMES = (".csv", ".tsv", ".psv", ".json", ".jsonl", ".ndjson", ".geojson")
"""Tables and JSON: settings and manifests when small, rows of data when large."""
DATA_MIN_BYTES = 32 * 1024
"""From this size such a file is data.  Of the 43 CSV, TSV and JSON files of 32 KiB or more
on the machine this was measured on (the venv, the bench corpora, /usr/share, the standard
library; docs/operations.md, Measured) none is code or settings: test vectors, ISO code
tables, SBOMs, a tokenizer, package lists, checksums.  A manifest or a config is a few KiB."""
DATA_RULES = 1
"""Bumped when ``is_data`` decides differently: part of the index's fingerprint."""


def is_data(path: str, size: int) -> bool:
    """A data file (``data``): a CSV/TSV table or a JSON (Lines) file of ``DATA_MIN_BYTES``
    or more.  A 285 KB SBOM and a 69 KB table made 217 chunks beside the 18 of the module
    they sat beside, and came up among its hits, for ten times the code's embedding."""
    return size >= DATA_MIN_BYTES and path.rsplit("/", 1)[-1].lower().endswith(DATA_NAMES)


def is_lock_file(path: str) -> bool:
    """A dependency lock file, by its name alone (``LOCK_FILES``, ``pylock.*.toml``)."""
    name = path.rsplit("/", 1)[-1].lower()
    return name in LOCK_FILES or (name.startswith("pylock.") and name.endswith(".toml"))


def generated(path: str, data: bytes) -> str | None:
    """``lockfile``, ``lfs_pointer``, ``source_map``, ``minified`` or ``compiled`` for what
    tools write, else None.

    A lock file (``LOCK_FILES``) is hundreds of chunks of package names, versions and
    hashes: axios's own ``package-lock.json`` (837 KB) makes 475 chunks beside the 290 of
    its ``lib/``, embedded for nothing.

    A source map (``*.map``: JSON that begins ``{"version": 3``) repeats the sources it
    maps, so its chunks come up beside theirs; a minified bundle is one line of renamed
    code, hundreds of chunks that say nothing; compiled JavaScript, CSS and declarations
    (their last line names their source map) repeat their sources. Committed ``dist/``
    folders hold all three: a package's questions, asked of the package as published
    (``bench/questions.py``'s judgements), ranked its own files far lower beside them.

    A Git LFS pointer stands in the repository for a file kept elsewhere (an image, a
    model, a data set: whatever its name): three lines of hash and size, alike in every
    pointer, so that a repository of LFS images indexed each as one chunk of text.
    """
    if is_lock_file(path):
        return "lockfile"
    if len(data) < LFS_POINTER_MAX and _LFS_POINTER.match(data):
        return "lfs_pointer"
    name = path.rsplit("/", 1)[-1].lower()
    if name.endswith(".map") and _SOURCE_MAP.match(data):
        return "source_map"
    if name.endswith(_MINIFIED_NAMES):
        return "minified"
    if name.endswith(_COMPILABLE) and _COMPILED.match(data, _last_line(data)):
        return "compiled"
    if name.endswith(_MINIFIABLE) and len(data) >= MINIFIED_MIN_BYTES:
        long = sum(len(line) for line in data.split(b"\n") if len(line) > MINIFIED_LINE)
        if long >= MINIFIED_SHARE * len(data):
            return "minified"
    return None


def _last_line(data: bytes) -> int:
    """Where the last line that is not blank begins (no copy of the file made)."""
    end = len(data)
    while end and data[end - 1] in b" \t\r\n":
        end -= 1
    return data.rfind(b"\n", 0, end) + 1


def skip_reason_of_entry(entry: Entry) -> str | None:
    """Entries that are never read: a submodule's commit, a symlink's target."""
    if entry is Entry.SUBMODULE:
        return "submodule"
    if entry is Entry.SYMLINK:
        return "symlink"
    return None


def as_text(data: bytes, *, max_size: int) -> Text | str:
    """The chunkable text of a file, or the reason it is skipped."""
    if len(data) > max_size:
        return "too_large"
    if b"\0" in data[:BINARY_SNIFF]:
        return "binary"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return Text(data=data.decode("utf-8", errors="replace").encode("utf-8"), replaced=True)
    return Text(data=data, replaced=False)


def read_text(
    git: GitSource, version: FileVersion, *, max_size: int
) -> tuple[FileVersion, Text | str]:
    """(the version actually read, its text or the reason it is skipped): :func:`read_raw`,
    then :func:`as_text`, the two halves indexing runs (``pipeline/prepare.py``, the second
    possibly on a worker process), in one call.
    """
    version, raw = read_raw(git, version, max_size=max_size)
    if isinstance(raw, str):
        return version, raw
    return version, as_text(raw, max_size=max_size)


def read_raw(
    git: GitSource, version: FileVersion, *, max_size: int, skip_lock_files: bool = False
) -> tuple[FileVersion, bytes | str]:
    """(the version actually read, its bytes or the reason it is skipped), not decoded yet.

    The half of :func:`read_text` that needs the repository (the other half, ``as_text``,
    can run in a worker process).  The size is checked before reading (at most
    ``max_size`` bytes are read).  A dirty file is re-hashed: the version
    returned is the one read, which may be newer than its status said.  A
    file that cannot be read (or vanished since its status) is returned with
    the blob ``UNREADABLE``: the index never claims a version it did not read,
    and the file is read again once it can be.  ``skip_lock_files``: a lock file is
    skipped by its name, unread (a large one is a ``lockfile``, not ``too_large``).
    """
    reason = skip_reason_of_entry(version.entry)
    if reason:
        return version, reason
    if skip_lock_files and is_lock_file(version.path):
        return version, "lockfile"
    unreadable = dataclasses.replace(version, blob=UNREADABLE, dirty=True)
    if version.blob == UNREADABLE:
        return unreadable, "unreadable"
    try:
        raw = git.read(version, limit=max_size)
    except OSError:
        return unreadable, "unreadable"
    if raw is None:
        return version, "too_large"
    if version.dirty:
        blob = blob_id(raw)
        if blob != version.blob:
            version = dataclasses.replace(version, blob=blob)
    return version, raw

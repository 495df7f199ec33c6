"""Syntax-aware chunks of one file.

``chunk(path, source)`` needs no repository, no index and no embedding model
(the tokenizer is enough).  The rules, in short:

- **Units are definitions.**  Each function and method is one chunk when it
  fits the content budget; sibling definitions are never merged unless
  ``ChunkingSettings.merge_siblings`` is set.  A class (struct, impl, trait,
  interface, …) with member definitions becomes a *synthetic* header chunk
  (its own text with every member cut to its signature) plus one chunk per
  member; the rest of the class body (class line, docstring, attributes) is
  covered by ordinary ``block`` chunks.  Leading comments, doc comments,
  decorators and attributes stay with the definition after them.
- **Glue** (imports, constants, top-level statements) is merged greedily, in
  file order, up to the budget (``module`` chunks at top level, ``block``
  chunks inside a definition).
- **Over the budget**, a node is split at its children, recursively, merging
  adjacent small pieces (cAST).  A node without children is cut at line
  breaks; only a line longer than the budget is cut, at whitespace, and a
  single word longer than the budget is left whole (the only way a leaf
  chunk exceeds the budget).  The first piece of a split definition keeps its
  kind and symbol; the others are ``block`` chunks whose parent it is.
- **Budget** is counted in non-whitespace characters (ASCII whitespace is
  not counted), so indentation style does not change chunk boundaries.
- **Coverage**: every byte of the file that is not ASCII whitespace lies in
  exactly one non-synthetic chunk, and ``content == source[start_byte:end_byte]``.
- **Context**: ``embed_text`` is a header in words, then the content:
  ``method load in class DataLoader (Loads batches.) in file src/x.py (Data access.)``
  -- kind, name, enclosing scopes, file, and for Python the first sentence of the
  enclosing class's and module's docstrings (measured by ``bench/retrieval.py``:
  they help dense and BM25 retrieval of per-definition chunks).
- **Prose and data**: Markdown and reStructuredText by heading sections (the
  heading path is the symbol, ``Install > Linux``); JSON, YAML and TOML by
  keys and tables, recursively, merged up to the budget; plain text by
  paragraphs, then lines.

Kinds: ``module``, ``block``, ``function``, ``method``, ``class``, ``struct``,
``interface``, ``trait``, ``impl``, ``enum``, ``type``, …, ``section``, ``key``,
``table``, ``text``.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, make_dataclass
from itertools import chain
from operator import attrgetter
from typing import Final

from tree_sitter import Parser, Tree

from codechunkd import logs
from codechunkd.chunking import _guard, docstrings, repairs
from codechunkd.chunking._chunk_code import Anchor, CodeSplitter, Piece
from codechunkd.chunking._chunk_text import split_rst, split_text
from codechunkd.chunking.languages import TEXT, detect_language, get_language, has_grammar
from codechunkd.chunking.macros import blank_export_macros
from codechunkd.chunking.references import Ref, extract
from codechunkd.chunking.refs_package import json_refs
from codechunkd.chunking.rules import Rules, body_of, rules_for
from codechunkd.chunking.signatures import signature_text
from codechunkd.config.settings import ChunkingSettings
from codechunkd.errors import ChunkingError
from codechunkd.types import ContentHash

__all__ = [
    "CHUNKER_VERSION",
    "LANGUAGE_VERSIONS",
    "Chunk",
    "CountTokens",
    "chunk",
    "chunk_many",
    "content_hash",
]

CountTokens = Callable[[Sequence[str]], list[int]]

#: Bump when chunk boundaries, embed texts or the references a chunk records change in
#: every language: indexed rows are rebuilt (for one language's, see LANGUAGE_VERSIONS).
#: 5: Go and TypeScript variables get their class (``binds``: receivers, parameters, ``new``).
#: 6: Rust: calls in macros' tokens, types named in paths (``Kind::Bell``), ``use m::{self}``.
#: 7: Java and Rust variables get their class (``binds``); Java class names as qualifiers.
#: 8: JS/TS re-exports (``export * from``, ``export {a} from``) are import rows.
#: 9: C++ ``.h`` files are C++, and ``class TORCH_API Tensor {`` is the class ``Tensor``.
#: 10: Go variables of a package's type (``&http.ServeMux{}``) bind it with the package.
#: 11: a C/C++ forward declaration (``class Tensor;``) is module code, not a definition.
#: 12: a ``.h`` file's C++ markers are looked for outside its comments.
#: 13: C, C++ and CUDA references: calls, types, bases, ``#include``, variables' classes.
#: 14: no chunk is only ``namespace x {`` or the rest of a line; ``#ifdef`` is laid out in place.
#: 15: a C++ function returning a reference (``T& f()``) and ``operator bool`` are named.
#: 16: a tiny last glue piece after a definition joins it; C++ macros alone on a line or
#: before a function's type and name are blanked (LANGUAGE_VERSIONS cpp 1 and 2, folded).
#: 17: a doc comment too long to join its definition is a ``doc`` chunk named for it; and,
#: folded from LANGUAGE_VERSIONS: a scope without a body is module code (Rust ``mod a;``),
#: C#/PHP/Perl statement scopes name what follows; Perl, CMake, Tcl (``.tcl`` was text) and
#: Vim script definitions, POD cut between paragraphs; ``Foo.prototype.bar = function`` is
#: a JavaScript/TypeScript definition; C++ macros before a function's type and name.
CHUNKER_VERSION = 17

LANGUAGE_VERSIONS: Final[Mapping[str, int]] = {
    "perl": 5,
    "php": 3,
    "cmake": 1,
    "csharp": 2,
    "ruby": 2,
    "python": 4,
    "go": 7,
    "bash": 1,
    "javascript": 8,
    "typescript": 10,
    "tsx": 11,
    "rust": 1,
    "java": 1,
    "c": 1,
    "cpp": 1,
    "cuda": 1,
    "json": 1,
}
"""The chunker's version per language, on top of CHUNKER_VERSION (17 folded the earlier ones).

- perl 1: Perl's references (calls, method calls, ``use`` lists and modules); perl 2 (with
  php 1, csharp 1): the chunk holding a scope statement (``package Foo;``,
  ``namespace App;``) names the scope among its definitions (``defs Foo``); perl 3: a piece
  of POD is a ``section`` named for the heading it opens or goes on with; perl 4: a
  package's bases (``use parent``, ``use base``, ``@ISA``) and ``SUPER::`` calls.
- go 1: what a call gives a variable (``t := tpl.New("x")``, ``u, err := t.Parse(s)``)
  and a function's or method's first result (``func New() *Template``: a ``New()`` row);
  no variable of a predeclared type (``s string``) is bound.
- bash 1: Bash's references (commands, ``source`` and ``.``).
- php 2: PHP's references (calls, ``new``, static calls, bases, types, ``use``, variables'
  classes).
- cmake 1: CMake's references (commands, ``include``), its definitions' names in lower case.
- csharp 2: C#'s references (calls, ``new``, bases, types, ``using``, variables' classes).
- ruby 1: Ruby's references (calls, bases and mixins, ``require``, ``X.new``'s class).
- python 1: ``x = _Private()`` gives ``x`` its class, as ``x = Public()`` does; python 2:
  so does ``x = Generic[T]()``; python 3: annotations in any form, calls' results
  (``x = make()``, ``with … as x``), ``def make() -> T``, ``self.x`` of a method, generic
  bases (``A(Base[T])``), names in dictionaries, lists, tuples and defaults
  (``chunking/refs_python.py``).
- typescript, tsx 1: call signatures on lines of their own (no semicolons) are parsed as
  an interface's members (``chunking/repairs.py``); typescript, tsx 2 (with javascript 1):
  a declared object literal of two functions or more (``const api = { box() {…} }``) is a
  definition of kind ``object``, its functions its members; ``key: function …`` is one;
  typescript, tsx 3: fields' and parameter properties' classes, return types
  (``function make(): T``: a ``make()`` row) and calls' results (``const s = make()``);
  with javascript 2: a function value cast or in parentheses (``= function f() {…} as
  any``, ``= (function () {…})``) is a function.
- python 4, go 2, javascript 3, typescript and tsx 4, ruby 2, rust, java, c, cpp and cuda
  1: names bound outside any function are definitions (``MAX = 3``, ``Color.RED``, Go's
  ``const`` and ``var``, top-level ``const`` and class fields, Rust's ``const`` and
  ``static``, Java's fields and enum constants, Ruby's constants, ``#define X 1``:
  ``chunking/refs_defines.py``); typescript, tsx 5: an interface's properties too; 6: an
  enum's members.
- go 3: a struct's fields are definitions (``Server.Addr``), and a field or package name
  read (``s.Addr``, ``http.StatusOK``) is a ``value`` use; go 4: so is a name returned,
  assigned, in a composite literal or a ``case`` (``return ErrClosed``); go 5: a struct
  field's type is a ``binds`` row; go 6, 7: an embedded type is a base, interface methods defined.
- javascript 4-7, typescript 7-9, tsx 7-10: CommonJS re-exports (``module.exports =
  require('./x')``), ``new`` and ``this.x = new X()`` bind, destructured top-level names,
  JSX components (``<Button>``) called; javascript 8, typescript 10, tsx 11: ``export``.
- php 3, perl 5: a class's or file's ``const``, Perl's ``use constant``, is a definition
  (``Client::MAX``), ``self::MAX`` and a bare ``MAX`` (Perl) a use.
- json 1: a ``package.json`` says the package it declares and its entry files, a
  ``tsconfig.json`` the paths its ``paths`` and ``baseUrl`` map names to (``package`` rows:
  ``chunking/refs_package.py``).

Bump a language's entry (``cpp``: 1) when only its files' chunks change: an index then
re-chunks the files it read as that language, the others stay.  A change to which
language a file is read as bumps the language it was read as before.  Folded into
CHUNKER_VERSION (and emptied) when that is bumped."""


def content_hash(text: str) -> ContentHash:
    """sha256 hex digest of a text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    """One chunk of one file."""

    id: str
    """Deterministic id, unique within the file: same file bytes, same ids."""
    path: str
    """Path of the file, relative to the repository root, with ``/`` separators."""
    language: str
    """Language name (``python``, ``markdown``, ``text``, …)."""
    kind: str
    """``module``, ``class``, ``function``, ``method``, ``block``, ``section``, ``text``, …"""
    symbol: str
    """Qualified name (``DataLoader.load``), or ``""`` for anonymous code."""
    parent_id: str | None
    """``id`` of the enclosing chunk (a method's class, a definition's module), if any."""
    start_line: int
    """First line, 1-based."""
    end_line: int
    """Last line, 1-based, inclusive."""
    start_byte: int
    end_byte: int
    """Byte span: ``content == source[start_byte:end_byte].decode()`` unless synthetic."""
    content: str
    """The text a reader gets back."""
    content_hash: ContentHash
    """sha256 of ``content``."""
    token_count: int
    """Tokens of ``embed_text`` as the embedding model's tokenizer counts them."""
    signature: str
    """Declaration line(s) of a definition, ``""`` otherwise."""
    docstring: str
    """The definition's docstring or doc comment, ``""`` when it has none."""
    embed_text: str
    """What the embedding model reads: a short context header in words, then the content."""
    synthetic: bool = False
    """True for a chunk that is not a contiguous span of the file (e.g. a class header)."""
    names: tuple[str, ...] = ()
    """Qualified names of the definitions in the chunk (for the full-text index)."""
    part: int = 0
    """For a definition split over several chunks: 1, 2, … in file order; 0 when whole."""
    refs: tuple[Ref, ...] = ()
    """The names the chunk uses (calls, imports, inheritance, type uses), in file order
    (:mod:`codechunkd.chunking.references`); none in synthetic chunks."""

    @property
    def header(self) -> str:
        """The context header that ``embed_text`` puts before the content."""
        return self.embed_text[: len(self.embed_text) - len(self.content) - 1]

    def __reduce__(self) -> tuple[Callable[..., Chunk], tuple[object, ...]]:
        # chunk_many sends chunks between processes: pickled as their field values, they
        # cost ~1/5 of the dataclass's __getstate__/__setstate__ (loops over fields() in
        # Python, then sets each field through object.__setattr__ as the class is frozen)
        return _new_chunk, _field_values(self)


_field_values: Final = attrgetter(*(f.name for f in fields(Chunk)))
#: Chunk's twin without ``frozen``: same slots in the same order, so the same memory layout.
_ChunkBuilder: Final = make_dataclass(
    "_ChunkBuilder", [f.name for f in fields(Chunk)], slots=True, eq=False, repr=False
)


def _new_chunk(*values: object) -> Chunk:
    """``Chunk(**dict(zip(field_names, values)))``, at a quarter of the cost.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``;
    with ~2,400 chunks per MB of code that showed in profiles.  The twin's ``__init__``
    stores the fields directly, then the object becomes a Chunk (a layout-compatible
    ``__class__`` assignment, checked by CPython).
    """
    c = _ChunkBuilder(*values)
    c.__class__ = Chunk
    built: Chunk = c
    return built


_WS: Final = b" \t\r\n\f\v"
_local = threading.local()
_PLAIN_KINDS: Final[dict[str, dict[int, bool]]] = {}  # language -> CodeSplitter's plain_kinds
# chunk_many starts workers for this much source at least (2 workers broke even at ~3 MB)
_POOL_MIN_BYTES: Final = 2 * 1024 * 1024


def _parser(language: str) -> Parser:
    parsers: dict[str, Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    p = parsers.get(language)
    if p is None:
        p = parsers[language] = Parser(get_language(language))
    return p


def chunk(
    path: str,
    source: bytes,
    settings: ChunkingSettings | None = None,
    *,
    language: str | None = None,
    count_tokens: CountTokens | None = None,
) -> list[Chunk]:
    """Chunks of one file, in file order (synthetic chunks before their children)."""
    settings = settings if settings is not None else ChunkingSettings()
    lang = language or detect_language(path, source, settings.extensions)
    if not source.strip(_WS):
        return []
    budget = max(1, settings.budget)
    rules = rules_for(lang)
    module_note = ""
    tree = None
    if lang != TEXT and has_grammar(lang):
        tree = _parse_guarded(path, lang, source)
    if tree is None:
        lang = TEXT
        rules = rules_for(TEXT)
        pieces = split_text(source, budget)
    else:
        if lang == "rst":
            pieces = split_rst(source, tree.root_node, budget)
        else:
            splitter = CodeSplitter(
                source,
                rules,
                budget,
                merge_siblings=settings.merge_siblings,
                plain_kinds=_PLAIN_KINDS.setdefault(lang, {}),
            )
            kind = "section" if lang == "markdown" else "module"
            pieces = splitter.split_tree(tree.root_node, kind=kind)
            if rules.python_docstrings:
                module_note = docstrings.module_summary(tree.root_node)
    out = _finish(path, source, lang, rules, pieces, count_tokens, module_note)
    if tree is not None and lang == "json":  # a ``package.json``, a ``tsconfig.json``
        _attach_refs(out, json_refs(path, tree.root_node))
    elif tree is not None and lang != "rst":
        _attach_refs(out, extract(lang, tree, source))
    return out


def _attach_refs(chunks: list[Chunk], refs: list[Ref]) -> None:
    """Give each ref to the non-synthetic chunk holding its byte (exactly one holds any
    byte that is not whitespace).  The chunks are new and not shared yet: the field is set
    in place, as ``_new_chunk`` builds them."""
    if not refs:
        return
    spans = sorted((c.start_byte, c.end_byte, i) for i, c in enumerate(chunks) if not c.synthetic)
    starts = [s for s, _, _ in spans]
    held: dict[int, list[Ref]] = {}
    for r in refs:
        k = bisect.bisect_right(starts, r.byte) - 1
        if k >= 0 and r.byte < spans[k][1]:
            held.setdefault(spans[k][2], []).append(r)
    for i, mine in held.items():
        object.__setattr__(chunks[i], "refs", tuple(mine))


def _parse_guarded(path: str, language: str, source: bytes) -> Tree | None:
    """The file's tree, or None when the grammar would crash or loop on it (logged).

    See :mod:`codechunkd.chunking._guard`: a crash inside a grammar is a signal, not an
    exception, so the inputs that cause one are recognised before parsing; the file is
    then chunked as text (still indexed, still searchable).
    """
    seconds = _guard.parse_seconds(len(source))
    reason = _guard.too_deep(language, source)
    if reason is None and _guard.risky(language, source):
        reason = _guard.survives(language, source, seconds)
    if reason is None:
        parser = _parser(language)
        began = time.monotonic()
        tree = _guard.parse(parser, blank_export_macros(language, source), seconds)
        if tree is not None:
            again = min(seconds, repairs.repair_seconds(time.monotonic() - began))
            return repairs.repaired(
                language, source, tree, lambda fixed: _guard.parse(parser, fixed, again)
            )
        reason = f"the parse ran past {seconds:.0f} s"

    logs.get_logger("codechunkd.chunking").warning(
        "parsed_as_text", path=path, language=language, reason=reason
    )
    return None


def chunk_many(
    files: Iterable[tuple[str, bytes]],
    settings: ChunkingSettings | None = None,
    *,
    workers: int | None = None,
    count_tokens: CountTokens | None = None,
) -> Iterator[list[Chunk]]:
    """:func:`chunk` over many ``(path, source)`` pairs, in input order, on ``workers`` processes.

    tree-sitter holds the GIL while it parses, so threads do not help; processes do
    (``workers`` defaults to the CPU count; 1 chunks in this process).  At most a few
    batches per worker are in flight, so memory stays bounded on any number of files.
    ``count_tokens`` must be picklable (a module-level function); by default each
    worker loads the bundled model's tokenizer.  The program's main module must be
    importable without side effects (``if __name__ == "__main__":``), as for any
    ``spawn`` process pool.  An input under 2 MiB is chunked in this process: starting
    the workers would cost more than they save.

    A worker that dies (killed, out of memory) raises :class:`ChunkingError` saying how
    it ended, at once and never a hang (:mod:`codechunkd.procs`: a pipe per worker);
    then, as when the iteration ends or is closed early, no worker is left running.
    """
    n = workers if workers is not None else (os.cpu_count() or 1)
    items = iter(files)
    head: list[tuple[str, bytes]] = []  # read before deciding whether workers pay
    size = 0
    if n > 1:
        for item in items:
            head.append(item)
            size += len(item[1])
            if size >= _POOL_MIN_BYTES:
                break
    if size < _POOL_MIN_BYTES:
        for path, source in chain(head, items):
            yield chunk(path, source, settings, count_tokens=count_tokens)
        return
    from codechunkd.procs import WorkerDied, WorkerPool

    pool = WorkerPool(n, _chunk_batch, (settings, count_tokens), name="codechunkd-chunk")
    try:
        with pool:
            for chunks in pool.map(_batches(chain(head, items)), ahead=3 * n):
                yield from chunks
    except WorkerDied as exc:
        raise ChunkingError(f"a chunking worker process died (pid {exc.pid}, {exc.how})") from exc


def _chunk_batch(
    batch: list[tuple[str, bytes]],
    settings: ChunkingSettings | None,
    count_tokens: CountTokens | None,
) -> list[list[Chunk]]:
    return [chunk(path, source, settings, count_tokens=count_tokens) for path, source in batch]


def _batches(files: Iterable[tuple[str, bytes]]) -> Iterator[list[tuple[str, bytes]]]:
    """``files`` in consecutive batches of 256 KiB or so: a task for a worker, enough to
    amortise the pickling round trip."""
    batch: list[tuple[str, bytes]] = []
    size = 0
    for item in files:
        batch.append(item)
        size += len(item[1])
        if size >= 256 * 1024:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


_Row = tuple[Piece, str, int, int, int, int, str, str, str, str, str]
"""A kept piece's facts, in ``_finish``'s steps: the piece, id, start and end line, start
and end byte, content, content hash, signature, docstring, embed text."""


def _finish(
    path: str,
    src: bytes,
    language: str,
    rules: Rules,
    pieces: list[Piece],
    count_tokens: CountTokens | None,
    module_note: str = "",
) -> list[Chunk]:
    """Trim the pieces, give them text, lines, ids and context headers, count their tokens."""
    rows, module_id = _describe(path, src, rules, pieces, module_note)
    counts = _count(rows, count_tokens)
    return _chunks(path, language, rows, counts, module_id)


def _describe(
    path: str, src: bytes, rules: Rules, pieces: list[Piece], module_note: str
) -> tuple[list[_Row], str | None]:
    """The pieces that hold more than whitespace, trimmed, each with its id (set on the
    piece too), lines, text, signature, docstring and embed text; and the module's id."""
    seen: dict[tuple[str, str], int] = {}
    rows: list[_Row] = []
    module_id: str | None = None
    # a cursor: line_no is the line of byte line_pos (pieces come, almost always, in file
    # order, so each newline is counted once)
    line_pos, line_no = 0, 1
    sha256 = hashlib.sha256
    notes: dict[int, str] = {}  # synthetic class piece -> first sentence of its docstring
    prefix = f"{path}\0".encode()
    file_words = f"in file {path} ({module_note})" if module_note else f"in file {path}"
    for p in pieces:
        seg = src[p.start : p.end]
        rest = seg.lstrip(_WS)
        stripped = rest.rstrip(_WS)
        if not stripped:
            continue  # p.cid stays None: its children take its parent
        a = p.start + len(seg) - len(rest)
        b = a + len(stripped)
        synthetic = p.synthetic_text is not None
        if p.synthetic_text is not None:
            text = p.synthetic_text
            chash = content_hash(text)
        else:
            text = stripped.decode("utf-8", "replace")
            chash = sha256(stripped).hexdigest()
        key = (p.kind, chash)
        occ = seen.get(key, 0)
        seen[key] = occ + 1
        cid = p.cid = sha256(prefix + f"{p.kind}\0{chash}\0{occ}".encode()).hexdigest()[:32]
        if module_id is None and p.kind == "module" and not synthetic:
            module_id = cid
        if a < line_pos:
            line_pos, line_no = 0, 1
        start_line = line_no + src.count(b"\n", line_pos, a)
        if synthetic:  # its members come next, inside [a, b)
            end_line = start_line + src.count(b"\n", a, b - 1)
            line_pos, line_no = a, start_line
        else:  # the text ends with no newline: b is on its last line
            end_line = start_line + stripped.count(b"\n")
            line_pos, line_no = b, end_line
        signature = docstring = ""
        if p.defn is not None:
            body = body_of(p.defn)
            signature = signature_text(src, p.defn, body, rules)
            docstring = docstrings.docstring(src, body, p.comments, rules)
        note = notes.get(id(p.parent)) if isinstance(p.parent, Piece) else None
        if synthetic and docstring:
            notes[id(p)] = docstrings.summary(docstring)
        embed = f"{_header(p, note)} {file_words}\n{text}"
        rows.append((p, cid, start_line, end_line, a, b, text, chash, signature, docstring, embed))
    return rows, module_id


def _count(rows: list[_Row], count_tokens: CountTokens | None) -> list[int]:
    """The tokens of each row's embed text."""
    counter = count_tokens
    if counter is None:
        from codechunkd.chunking.tokens import counter_for

        counter = counter_for()
    return counter([r[10] for r in rows]) if rows else []


def _chunks(
    path: str, language: str, rows: list[_Row], counts: Sequence[int], module_id: str | None
) -> list[Chunk]:
    """The rows as chunks: a piece with no parent of its own hangs under the module."""
    out: list[Chunk] = []
    for row, n in zip(rows, counts, strict=True):
        p, cid, start_line, end_line, a, b, text, chash, signature, docstring, embed = row
        parent = _resolve(p.parent)
        if parent is None and module_id is not None and cid != module_id:
            parent = module_id
        names = p.names or ((p.symbol,) if p.defn is not None and p.symbol else ())
        # the fields in Chunk's order: id, path, language, kind, symbol, parent_id,
        # start_line, end_line, start_byte, end_byte, content, content_hash, token_count,
        # signature, docstring, embed_text, synthetic, names, part, refs
        # fmt: off
        out.append(_new_chunk(
            cid, path, language, p.kind, p.symbol, parent,
            start_line, end_line, a, b, text, chash, n,
            signature, docstring, embed, p.synthetic_text is not None, names, p.part, (),
        ))
        # fmt: on
    return out


def _resolve(parent: Piece | Anchor | None) -> str | None:
    for _ in range(1000):
        if parent is None:
            return None
        if isinstance(parent, Anchor):
            parent = parent.target if parent.target is not None else parent.parent
            continue
        if parent.cid is not None:
            return parent.cid
        parent = parent.parent
    return None


_NAMED_KINDS: Final = ("section", "key", "table")


def _header(p: Piece, note: str | None) -> str:
    """The context header in words, up to its file: ``method load in class DataLoader``.

    ``note`` (the first sentence of the enclosing class's docstring) follows the class;
    the caller appends ``in file src/x.py`` and the module docstring's first sentence.
    """
    kind = p.kind
    if kind in _NAMED_KINDS and p.symbol:
        return f"{kind} {p.symbol}"
    if p.defn is not None:
        lead = f"{kind} {p.name}" if p.name else kind
        if p.part:
            lead = f"{lead} (part {p.part})"
    elif p.names:
        listed = ", ".join(p.names[:8]) + (", …" if len(p.names) > 8 else "")
        lead = f"{kind} with {listed}"
    elif kind == "doc":
        lead = f"documentation of {p.name}" if p.name else "documentation"
    elif kind == "module":
        lead = "module code"
    elif kind == "block":
        lead = f"code (part {p.part})" if p.part else "code"
    else:
        lead = kind
    if not p.scope:
        return lead
    words = [lead]
    for scope_kind, scope_name, _ in reversed(p.scope[-4:]):
        if scope_kind and scope_name:
            words.append(f"in {scope_kind} {scope_name}")
            if note:
                words.append(f"({note})")
                note = None
    return " ".join(words)

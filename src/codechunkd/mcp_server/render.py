"""What the model reads: hits, outlines, chunks and the status rendered as text.

Owns the size budgets of an answer (``BUDGET``, ``HIT_CAP``, ``PARENT_LINES``) and the
functions that cut and fence chunk text.  Pure functions of their arguments: they must not
reach the daemon or the index (backend.py) nor know the MCP SDK (tools.py builds results).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from codechunkd.chunking.snippet import dedent
from codechunkd.daemon.status import partial_text
from codechunkd.display import called_by, one_line, printable
from codechunkd.storage.request import shown

BUDGET = 24_000
"""Characters of chunk text one answer carries by default (about 6k tokens)."""
HIT_CAP = 4_000
"""Characters of one hit's chunk before it is cut (the full chunk: ``read_chunks``)."""
PARENT_LINES = 40
"""Lines of each enclosing chunk ``read_chunks`` shows above the chunk."""


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    cut = text[:limit]
    return cut[: cut.rfind("\n")] if "\n" in cut else cut, True


def _fence(text: str, language: str) -> str:
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{language}\n{text}\n{ticks}"


def trim_hits(
    hits: Sequence[Mapping[str, Any]], budget: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """Hits whose chunk text fits ``budget`` characters in all, in rank order.

    Each hit keeps at most ``HIT_CAP`` characters; once the budget is spent the
    remaining hits keep their location but no text.  Returns the hits (with
    ``truncated``: the text was cut or left out) and notes saying what was cut.
    """
    left = budget
    out: list[dict[str, Any]] = []
    cut = omitted = 0
    for h in hits:
        text, was_cut = _cut(str(h.get("content") or ""), min(HIT_CAP, max(left, 0)))
        if not text and h.get("content"):
            omitted += 1
        elif was_cut:
            cut += 1
        left -= len(text)
        out.append(dict(h, content=text, truncated=was_cut))
    notes = []
    if cut:
        notes.append(f"{cut} chunk(s) cut short")
    if omitted:
        notes.append(f"{omitted} hit(s) shown without their text")
    if notes:
        notes.append(
            f"answer limited to {budget} characters; `read_chunks` with an id gives a chunk in full"
        )
    return out, notes


def render_hits(
    query: str,
    hits: Sequence[Mapping[str, Any]],
    via: str,
    notes: Sequence[str],
    about: Mapping[str, Any] | None = None,
) -> str:
    where = "the running daemon" if via == "daemon" else "the index on disk (no daemon running)"
    lines = [f"{len(hits)} hit(s) for {shown(query)}, from {where}."]
    about = about or {}
    if about.get("note"):
        lines.append(f"Note: {printable(str(about['note']))}.")
    if about.get("scope"):
        lines.append(f"Scope: {printable(str(about['scope']))}.")
    if isinstance(about.get("partial"), Mapping):
        lines.append(f"Partial: {partial_text(about['partial'])}.")
    cov = about.get("coverage") or {}
    if cov.get("vector_chunks", 0) < cov.get("text_chunks", 0):
        lines.append(f"Coverage: {cov.get('text')} (a first index is filling in vectors).")
    if notes:
        lines.append("Trimmed: " + "; ".join(notes) + ".")
    for n, h in enumerate(hits, 1):
        flags = " [STALE: the file changed on disk since it was indexed]" if h.get("stale") else ""
        lines.append(
            f"\n{n}. {printable(str(h['path']))}:{h['start_line']}-{h['end_line']}"
            f"  {printable(str(h.get('symbol') or '-'))}"
            f"  ({h.get('kind')}, {h.get('language')}, score {h.get('score')},"
            f" repo {h.get('repo')},"
            f" id {h.get('id')}){flags}"
        )
        for ctx in h.get("context") or ():
            lines.append(
                f"   in: {printable((str(ctx).splitlines() or [''])[0][:160], keep_tab=True)}"
            )
        if h.get("callers"):
            lines.append(f"   called by: {called_by(h['callers'], ids=True)}")
        if h.get("content"):
            language = str(h.get("language") or "")
            lines.append(_fence(dedent(str(h["content"]), language), language))
        elif h.get("truncated"):
            lines.append("   (text left out: over the size budget)")
    return "\n".join(lines)


_SIGNATURE_CHARS = 300
"""An outline's signature, on one line, is cut to this many characters."""
_BINDS_LISTED = 8
"""At most this many of a chunk's constants, variables and fields named in an outline."""


def outline_lines(
    rows: Sequence[Any], budget: int, values: Mapping[str, list[str]] | None = None
) -> tuple[list[str], int]:
    """The outline's text lines for as many of ``rows`` as fit ``budget`` characters, and
    how many rows that is (at least one: an answer always shows something); a chunk that
    binds constants, variables or fields (``values``, by id) names them."""
    lines: list[str] = []
    used = count = 0
    last_repo = None
    for r in rows:
        row_lines = []
        if r.repo != last_repo:
            row_lines.append(f"{printable(r.repo)}/{printable(r.path)}:")
        indent = "  " if r.parent_id and r.kind not in ("module",) else ""
        sig = f"  {printable(one_line(r.signature, _SIGNATURE_CHARS))}" if r.signature else ""
        bound = (values or {}).get(r.id, [])
        listed = ", ".join(printable(v) for v in bound[:_BINDS_LISTED])
        listed += ", …" if len(bound) > _BINDS_LISTED else ""
        row_lines.append(
            f"  {indent}{r.start_line}-{r.end_line}  {r.kind}  {printable(r.symbol or '-')}{sig}"
            f"  (id {r.id})" + (f"  binds {listed}" if listed else "")
        )
        size = sum(len(line) + 1 for line in row_lines)
        if count and used + size > budget:
            break
        lines += row_lines
        used += size
        count += 1
        last_repo = r.repo
    return lines, count


def row_summary(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "repo": r.repo,
        "path": r.path,
        "kind": r.kind,
        "symbol": r.symbol,
        "start_line": r.start_line,
        "end_line": r.end_line,
        "parent_id": r.parent_id,
        "signature": r.signature,
        "synthetic": r.synthetic,
    }


def header_above(parent: Any, child: Any) -> str:
    """The lines of ``parent`` above ``child`` (a class header, module imports), capped."""
    lines = parent.content.splitlines()
    above = lines[: max(0, child.start_line - parent.start_line)] or lines[:1]
    if len(above) > PARENT_LINES:
        above = [*above[:PARENT_LINES], "…"]
    return "\n".join(above).rstrip()


def short_status(doc: Mapping[str, Any]) -> dict[str, Any]:
    d = doc.get("daemon") or {}
    sources = []
    for s in doc.get("sources") or ():
        sources.append(
            {
                "repo": s.get("repo"),
                "ref": s.get("ref"),
                "branch": s.get("head_branch") or s.get("branch"),
                "head": s.get("head"),
                "indexed": s.get("commit"),
                "fresh": bool(s.get("fresh")),
                "pending_paths": s.get("pending_paths", 0) or 0,
                "partial": bool(s.get("pending")),
                "indexing": (s.get("progress") or {}).get("activity"),
                "dirty_files": len(s.get("dirty") or {}),
                "files": s.get("files", 0),
                "chunks": s.get("chunks", 0),
                "vector_chunks": s.get("vector_chunks"),
                "state": s.get("state"),
                "failing": s.get("failing"),
            }
        )
    return {"daemon": d.get("state", "stopped"), "index": doc.get("index"), "sources": sources}


def render_status(doc: Mapping[str, Any]) -> str:
    short = short_status(doc)
    if short["daemon"] == "stopped":
        lines = [
            "daemon: stopped; answers come from the index on disk, and edits made since "
            "it was written are not in it (`codechunkd run` keeps it live)"
        ]
    else:
        lines = [f"daemon: {short['daemon']} (the index follows edits and commits live)"]
    if not short["sources"] and short["daemon"] != "stopped":
        lines.append("no sources followed: `codechunkd add PATH` adds one")
    elif not short["sources"]:
        lines.append("nothing indexed yet: run `codechunkd run PATH`")
    for s in short["sources"]:
        head = "?" if s["branch"] == "?" else (s["head"] or "unborn")[:10]  # ?: not read
        indexed = (s["indexed"] or "unborn")[:10]
        word = "fresh" if s["fresh"] else "INDEXING" if s["indexing"] else "STALE"
        line = f"{s['repo']}: {word}; branch {s['branch']}, HEAD {head}, indexed {indexed}"
        if s["pending_paths"]:
            line += f"; {s['pending_paths']:,} changed paths pending"
        if s["indexing"] == "filling vectors":
            pass  # every file is written: the vectors' count below says what is left
        elif s["indexing"]:
            line += "; an indexing pass is running: some files may be missing or old until it ends"
        elif s["partial"]:
            line += "; PARTIAL: an indexing pass was interrupted, some files may be missing or old"
        vectors = s["vector_chunks"]
        if vectors is not None and vectors < s["chunks"]:
            line += (
                f"; vectors for {vectors:,} of {s['chunks']:,} chunks so far "
                "(search ranks the others by their full text)"
            )
        line += f"; {s['files']:,} files, {s['chunks']:,} chunks"
        if s["failing"]:  # its syncs fail (the repository gone, …): retried, rows kept
            line += f"; FAILING: {printable(str(s['failing']))}"
        lines.append(line)
    return "\n".join(lines)


def chunk_answer(row: Any, parents: Sequence[Any]) -> tuple[list[str], dict[str, Any]]:
    """One chunk of a ``read_chunks`` answer: its text lines (its location, the header lines
    of each enclosing chunk, outermost first, then its own text) and its structured data."""
    text, cut = _cut(row.content, BUDGET)
    parts = [
        f"{printable(row.repo)}/{printable(row.path)}:{row.start_line}-{row.end_line}"
        f"  {row.kind}  {printable(row.symbol or '-')}  (id {row.id})"
    ]
    child = row
    headers = []
    for p in reversed(parents):
        headers.append((p, header_above(p, child)))
        child = p
    for p, head in reversed(headers):
        parts.append(
            f"in {p.kind} {printable(p.symbol or '-')} ({p.start_line}-{p.end_line}, id {p.id}):"
        )
        parts.append(_fence(head, row.language))
    shown = _fence(dedent(text, row.language), row.language)
    parts.append(shown + ("\n(cut short)" if cut else ""))
    data = dict(
        row_summary(row),
        content=text,
        truncated=cut,
        parents=[dict(row_summary(p), header=h) for p, h in reversed(headers)],
    )
    return parts, data

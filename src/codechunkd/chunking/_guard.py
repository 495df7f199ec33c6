"""Parsing that cannot take the process down.

Some grammars of tree-sitter-language-pack 0.13 segfault on deep nesting: a crash, not an
exception, so ``try`` cannot guard it (measured by bisection in a child process; see
docs/operations.md and FACTS.md, "Grammars that crash the process"):

- ``markdown``: 255 open containers (``>`` quotes, list items) on one line's prefix;
- ``yaml``: 254 indentation levels (mappings, ``- `` sequences, ``? `` keys);
- ``agda``: 257 nested ``{-`` comments.

Three defences, cheapest first:

1. :func:`too_deep` -- for the grammars above, a nesting pre-check (a regular expression
   over line prefixes, C speed): past half the crash depth the file is chunked as text.
2. :func:`risky` then :func:`survives` -- for every other grammar, an input with a long
   run of punctuation or a very deep indentation is parsed once in a child process first
   (bounded in time and memory); if the child dies, the file is chunked as text.
3. :func:`parse` -- every parse has a deadline (tree-sitter's progress callback): a grammar
   that loops gives up and the file is chunked as text.

Normal code pays a dictionary look-up, one regular-expression scan and the progress
callback (measured with ``bench/chunking.py``: no measurable change).
"""

from __future__ import annotations

import atexit
import contextlib
import re
import select
import subprocess
import sys
import threading
import time
from typing import Final

from tree_sitter import Parser, Tree

__all__ = ["parse", "parse_seconds", "risky", "survives", "too_deep"]

#: Line prefixes that open a container per level, per grammar known to crash on depth.
#: Whitespace counts one level per column (a tab four): every level costs a column at
#: least, so the prefix's width bounds the depth from above.
_PREFIX: Final[dict[str, re.Pattern[bytes]]] = {
    "markdown": re.compile(rb"^(?:[ \t>]|(?:[-+*]|\d{1,9}[.)])(?=[ \t\r\n]|$))+", re.M),
    "yaml": re.compile(rb"^(?:[ \t]|[-?:](?=[ \t\r\n]|$))+", re.M),
}
#: Openers whose nesting crashes a grammar (counted, not parsed: an upper bound).
_OPENERS: Final[dict[str, bytes]] = {"agda": b"{-"}
#: Grammars that loop forever on some inputs inside their lexer, where tree-sitter's
#: progress callback is never called (COBOL on 870 bytes of random tokens): every parse
#: is tried in the child process first, where a timeout ends it.
_LOOPS: Final = frozenset({"cobol"})
#: Half the measured crash depth (254..257): a wide margin that real files never reach.
MAX_DEPTH: Final = 128

#: A run of ASCII punctuation this long, or an indentation this deep, makes an input worth
#: a trial parse in a child process.  Searched as a substring of the file with every
#: punctuation byte translated to ``!`` (C speed: a regular expression cost ~18% of
#: ``chunk()`` on the stdlib).
_RUN: Final = 200
_PUNCT: Final = bytes(
    33 if (32 < b < 127 and not chr(b).isalnum() and b != ord("_")) else 97 for b in range(256)
)
_BANGS: Final = b"!" * _RUN
_DEEP_INDENTS: Final = (b"\n" + b" " * _RUN, b"\n" + b"\t" * (_RUN // 4))
#: Memory a trial parse may take (address space of the child process).
_PROBE_MEMORY: Final = 2 << 30


def too_deep(language: str, source: bytes) -> str | None:
    """Why ``language``'s grammar must not parse ``source`` (it would crash), or None."""
    opener = _OPENERS.get(language)
    if opener is not None and source.count(opener) > MAX_DEPTH:
        return f"more than {MAX_DEPTH} {opener.decode()} (the grammar crashes when nested)"
    pattern = _PREFIX.get(language)
    if pattern is None or len(source) < MAX_DEPTH // 4:
        return None
    for m in pattern.finditer(source):
        prefix = m.group()
        if not prefix.strip(b" \t") and source[m.end() : m.end() + 1] in (b"\n", b"\r", b""):
            continue  # a blank line opens nothing
        if len(prefix) >= MAX_DEPTH // 4 and len(prefix) + 3 * prefix.count(b"\t") >= MAX_DEPTH:
            line = source.count(b"\n", 0, m.start()) + 1
            return f"nesting of {MAX_DEPTH}+ levels at line {line} (the grammar crashes there)"
    return None


def risky(language: str, source: bytes) -> bool:
    """Whether ``source`` looks like the inputs that crash grammars (long runs, deep indents)."""
    if language in _PREFIX:
        return False
    if language in _LOOPS:
        return True
    return any(i in source for i in _DEEP_INDENTS) or _punctuation_run(source)


def _punctuation_run(source: bytes) -> bool:
    """Whether ``source`` has ``_RUN`` ASCII punctuation bytes in a row.

    Such a run holds two consecutive bytes of every ``_RUN // 2``-th one: those samples
    are searched first, and only their neighbourhood is checked byte by byte.
    """
    step = _RUN // 2
    sample = source[::step].translate(_PUNCT)
    i = sample.find(b"!!")
    while i >= 0:
        window = source[max(0, (i - 1) * step) : (i + 3) * step].translate(_PUNCT)
        if _BANGS in window:
            return True
        i = sample.find(b"!!", i + 1)
    return False


def parse_seconds(size: int) -> float:
    """How long a parse of ``size`` bytes may take: 5 s, plus 50x tree-sitter's usual pace."""
    return 5.0 + size / 200_000


_READ_SLICE: Final = 512
"""Bytes handed to tree-sitter per read.  Most grammars read each slice once, but Perl's
scanner asks again at every token (34,348 reads for ``Math/BigFloat.pm``'s 207 KB): with
64 KiB slices, copying them made its parse 1.31 s against 0.04 s from a bytestring; with
512 bytes 0.10 s, and the other grammars read 1 KB in a few microseconds either way."""


def parse(parser: Parser, source: bytes, seconds: float) -> Tree | None:
    """``parser.parse(source)``, or None when it takes longer than ``seconds``.

    The progress callback is honoured only when the source comes from a read callback
    (tree-sitter ignores it for a bytestring).  The callback returns ``bytes`` slices: a
    ``memoryview`` makes ``Node.text`` crash later.
    """
    deadline = time.monotonic() + seconds

    def read(offset: int, _point: object) -> bytes:
        return source[offset : offset + _READ_SLICE]

    def progress(_offset: int, _has_error: bool) -> bool:
        return time.monotonic() > deadline

    try:
        return parser.parse(read, progress_callback=progress)
    except ValueError:  # "Parsing failed": cancelled by the callback
        parser.reset()
        return None


class _Prober:
    """One long-lived child process that parses what it is sent (started on first use).

    A Python start costs ~0.5 s on a busy machine: one child serves every trial parse,
    and a new one is started after a crash.  Requests are ``language seconds size\\n``
    then the bytes; the answer is one line, ``ok`` or ``timeout``.
    """

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        atexit.register(self.close)

    def close(self) -> None:
        """End the child (it exits at the end of its input)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            for f in (proc.stdin, proc.stdout):
                if f is not None:
                    f.close()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            cmd = [sys.executable, "-m", "codechunkd.chunking._guard"]
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self.proc

    def probe(self, language: str, source: bytes, seconds: float) -> str | None:
        """Why the child could not parse ``source``, or None when it parsed it."""
        err: OSError | None = None
        with self.lock:
            try:
                proc = self._start()
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"{language} {seconds} {len(source)}\n".encode() + source)
                proc.stdin.flush()
                ready, _, _ = select.select([proc.stdout], [], [], seconds + 2)
                answer = proc.stdout.readline().strip() if ready else b"hung"
            except OSError as exc:  # the child died while it read (EPIPE)
                answer, err = b"", exc
            if answer == b"ok":
                return None
            if answer == b"timeout":
                return f"the parse ran past {seconds:.0f} s in a child process"
            if answer == b"hung":
                proc.kill()
            code = proc.wait()
            self.proc = None
            if code < 0 and answer != b"hung":
                return f"the grammar crashed on it (signal {-code}, in a child process)"
            return f"the parse failed in a child process ({answer.decode() or err or code})"


_prober: Final = _Prober()


def survives(language: str, source: bytes, seconds: float) -> str | None:
    """Parse ``source`` in a child process first: why it failed there, or None if it did not.

    The child has 2 GiB of address space; a signal, a timeout or an exit is the reason
    the file is chunked as text instead.
    """
    return _prober.probe(language, source, seconds)


def _child() -> int:
    """The trial parses: requests on stdin (see :class:`_Prober`), under a memory limit."""
    import resource

    # macOS refuses an RLIMIT_AS it cannot enforce: the deadline still bounds the parse there
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (_PROBE_MEMORY, _PROBE_MEMORY))
    from codechunkd.chunking.languages import get_parser

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while header := stdin.readline():
        language, seconds, size = header.split()
        source = stdin.read(int(size))
        tree = parse(get_parser(language.decode()), source, float(seconds))
        stdout.write(b"ok\n" if tree is not None else b"timeout\n")
        stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child())

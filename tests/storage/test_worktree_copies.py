"""A repository and its worktree in one index, on a real index: the same chunk, definition
and use in both sources is one answer to ``search``, ``defs`` and ``refs``, not two slots of
each list (they were listed twice, under the same path and line).

Real git repositories (a worktree made by ``git worktree add``), a real LanceDB index and
the real model (through ``Indexer``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import Indexer, Repo, scaled

from codechunkd.config import Settings
from codechunkd.storage.reader import Index

EXE = str(Path(sys.executable).parent / "codechunkd")

CORE = """def parse_header(line):
    \"\"\"Split an HTTP header line into its name and value.\"\"\"
    name, _, value = line.partition(":")
    return name.strip(), value.strip()
"""
USE = """from core import parse_header


def headers(lines):
    return dict(parse_header(line) for line in lines)
"""


def _two_checkouts(repo: Repo, indexer: Indexer, tmp_path: Path) -> Path:
    """``repo`` and a worktree of it whose ``use.py`` calls ``parse_header`` once more (line
    9), both indexed: the worktree."""
    repo.write("core.py", CORE)
    repo.write("use.py", USE)
    repo.commit("init")
    worktree = tmp_path / "worktree"
    repo.git("worktree", "add", "-b", "other", str(worktree))
    more = "\n\ndef more(lines):\n    return parse_header(lines[0])\n"
    (worktree / "use.py").write_text(USE + more)
    indexer.sync(repo.path)
    indexer.sync(worktree)
    return worktree


def test_a_repository_and_its_worktree_answer_each_chunk_and_use_once(
    repo: Repo, indexer: Indexer, settings: Settings, tmp_path: Path
) -> None:
    """Both checkouts indexed (two sources, the same files): a search lists each chunk
    once, ``defs`` the definition once, ``refs`` and the callers each use once, the map
    each signature once; a file the worktree changed is its own answer beside the
    repository's."""
    _two_checkouts(repo, indexer, tmp_path)
    index = Index(indexer.store, settings)
    assert len(indexer.store.states()) == 2
    hits = index.search("split an HTTP header line into name and value", k=10)
    shown = [(h.path, h.start_line, h.end_line, h.content) for h in hits]
    assert len(shown) == len(set(shown)), shown
    assert ("core.py", 1) in {(h.path, h.start_line) for h in hits}
    assert [(d.path, d.line) for d in index.definitions("parse_header")] == [("core.py", 1)]
    uses = [(u.path, u.line, u.kind) for u in index.references("parse_header")]
    assert sorted(uses) == [
        ("use.py", 1, "import"),
        ("use.py", 5, "call"),
        ("use.py", 9, "call"),  # the worktree's own
    ], uses
    callers = [(c.path, c.symbol) for c in index.callers("parse_header")]
    assert sorted(callers) == [("use.py", "headers"), ("use.py", "more")], callers
    entries = index.refs.repo_map(count_tokens=lambda ts: [len(t) // 4 for t in ts], budget=10**4)
    [core] = [e for e in entries if e.path == "core.py"]
    assert [(sig, line) for _, sig, line in core.definitions] == [("def parse_header(line)", 1)]


def _cli(*argv: str, cwd: Path | None = None) -> list[str]:
    done = subprocess.run(
        [EXE, *argv], capture_output=True, text=True, timeout=scaled(120), cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_answers_from_several_checkouts_name_each_file_by_its_full_path(
    repo: Repo, indexer: Indexer, index_dir: Path, tmp_path: Path
) -> None:
    """``search`` and ``refs`` whose answers come from both checkouts write each file by
    its full path (``use.py:9`` alone did not say it is the worktree's); ``defs``, whose one
    answer is in both, keeps the path in the repository. With ``--json`` each definition
    and use names its checkout (``repo``), as each search hit does; run in one of the
    checkouts, an answer in both is that checkout's copy."""
    worktree = _two_checkouts(repo, indexer, tmp_path)
    where = ("--index-dir", str(index_dir))
    hits = _cli("search", "parse_header", "--mode", "text", "-k", "20", *where)
    heads = [ln for ln in hits if not ln.startswith(" ")]
    assert any(ln.startswith(f"{worktree}/use.py:") for ln in heads), hits
    assert all(ln.startswith((f"{worktree}/", f"{repo.path}/")) for ln in heads), hits
    uses = _cli("refs", "parse_header", *where)
    assert any(ln.startswith(f"{worktree}/use.py:9 ") for ln in uses), uses
    assert _cli("defs", "parse_header", *where)[0].startswith("core.py:1 ")
    used = json.loads("\n".join(_cli("refs", "parse_header", "--json", *where)))
    calls = {u["line"]: u["repo"] for u in used if u["kind"] == "call"}
    assert calls[9] == str(worktree), used  # the worktree's own; line 5 is in both
    assert calls.keys() == {5, 9} and calls[5] in {str(repo.path), str(worktree)}, used
    [defined] = json.loads("\n".join(_cli("defs", "parse_header", "--json", *where)))
    assert defined["repo"] in {str(repo.path), str(worktree)}, defined
    assert defined["source"] in {u["source"] for u in used}, (defined, used)
    for here in (worktree, repo.path):  # run in a checkout: its own copy of each answer
        [defined] = json.loads("\n".join(_cli("defs", "parse_header", "--json", *where, cwd=here)))
        assert defined["repo"] == str(here), defined
        used = json.loads("\n".join(_cli("refs", "parse_header", "--json", *where, cwd=here)))
        line_5 = [u for u in used if u["line"] == 5]
        assert [u["repo"] for u in line_5] == [str(here)], used

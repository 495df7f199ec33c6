"""The first run as a new user sees it, with real processes on real stdlib code.

A cold index of a few hundred real files takes minutes on two cores: the daemon
must serve status and search (marked partial while its files are written) long before
that, and a killed `codechunkd index` must not lose the vectors it computed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Repo, scaled, wait_for
from tests.daemon.test_service_e2e import EXE, Daemon, cli
from tests.test_mcp import tool_text

from codechunkd.chunking.chunker import chunk
from codechunkd.chunking.languages import detect_language
from codechunkd.chunking.tokens import counter_for
from codechunkd.config import load_settings
from codechunkd.storage.crashpoints import HOLD_ENV, TRACE_ENV
from codechunkd.storage.layout import IndexPaths

pytestmark = pytest.mark.slow

READY_S = 10.0
"""The daemon says READY=1 and answers status and search within this of its start, on an
idle machine (scaled by the machine's slowness when the test runs)."""


def stdlib_repo(repo: Repo, files: int) -> list[str]:
    """A repository of `files` real Python modules copied from the standard library."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found = sorted(
        p
        for p in root.rglob("*.py")
        if "site-packages" not in p.parts
        and "test" not in p.parts
        and "tests" not in p.parts
        and 2_000 < p.stat().st_size < 12_000
    )[:files]
    assert len(found) == files, len(found)
    names = []
    for p in found:
        rel = "lib/" + "/".join(p.relative_to(root).parts)
        repo.write(rel, p.read_bytes())
        names.append(rel)
    repo.commit("stdlib")
    return names


def test_a_search_while_the_files_are_written_is_partial(
    repo: Repo, tmp_path: Path, index_dir: Path
) -> None:
    """While a first index writes its files, a search answers what is written and says so
    (the CLI's and the MCP tool's): ``partial`` counts the files in the table against the
    sync's. The instant is held (the
    first batch written, the sync stopped there), not raced: 300 files are written in a few
    seconds on a fast machine."""
    stdlib_repo(repo, 300)
    trace = tmp_path / "points.trace"
    held = {HOLD_ENV: "write_batch.after:1", TRACE_ENV: str(trace)}
    d = Daemon(tmp_path, index_dir, repo.path, env=held, shutdown_timeout_s="0.5")
    try:
        d.wait_notify("READY=1", timeout=READY_S)
        wait_for(
            lambda: trace.exists() and "write_batch.after" in trace.read_text(),
            "the first batch written, the sync held there",
            timeout=60,
        )
        answer = d.call({"cmd": "search", "query": "parse the arguments", "k": 5}, timeout=30)
        partial = answer["partial"]
        assert "hits" in answer and partial is not None, answer
        assert 0 < partial["files_done"] < partial["files_total"] == 300, partial
        found = cli("search", "parse the arguments", "--index-dir", str(index_dir))
        assert found.returncode == 0, found.stderr
        assert found.stdout.startswith(f"partial: {partial['files_done']}/300 files"), found.stdout
        said = asyncio.run(
            tool_text(index_dir, tmp_path / "mcp.log", "search", query="parse the arguments", k=5)
        )
        assert "from the running daemon" in said, said  # an agent is told, as a person is
        assert f"Partial: {partial['files_done']}/300 files indexed so far" in said, said
    finally:
        d.kill()


def test_daemon_serves_status_and_search_while_a_cold_index_runs(
    repo: Repo, tmp_path: Path, index_dir: Path
) -> None:
    """READY=1, a status with advancing progress and a search answered, all while the first
    index of 300 real files is still running; once every file is written and only vectors
    fill in, the search is no longer called partial, and says how many vectors it has."""
    stdlib_repo(repo, 300)
    started = time.monotonic()
    d = Daemon(tmp_path, index_dir, repo.path, shutdown_timeout_s="0.5")
    try:
        d.wait_notify("READY=1", timeout=READY_S)
        doc = d.status()
        assert time.monotonic() - started < scaled(READY_S + 2)
        assert doc["daemon"]["state"] == "indexing"
        answer = d.call({"cmd": "search", "query": "parse the arguments", "k": 5}, timeout=30)
        assert "hits" in answer and "partial" in answer, answer

        def progress() -> dict[str, Any] | None:
            p: dict[str, Any] | None = d.status()["sources"][0]["progress"]
            # text first: the embedding is the fill after every file is written
            busy = p and p["activity"] in ("indexing", "filling vectors")
            return p if busy and p["embedded"] else None

        first = wait_for(progress, "embedding progress", timeout=120)
        assert first["files_total"] == 300
        advanced = wait_for(
            lambda: (p := progress()) and p["embedded"] > first["embedded"] and p,
            "progress advancing",
            timeout=30,
        )
        assert advanced["chunks_per_second"] > 0
        src = d.status()["sources"][0]
        assert not src["fresh"] and src["state"] == "indexing"
        text = cli("status", "--index-dir", str(index_dir))
        assert "[indexing]" in text.stdout and "interrupted" not in text.stdout, text.stdout
        assert "/300 files" in text.stdout and "ETA" in text.stdout
        filling = d.call({"cmd": "search", "query": "parse the arguments", "k": 5}, timeout=30)
        assert filling["partial"] is None, filling
        found = cli("search", "parse the arguments", "--index-dir", str(index_dir))
        assert found.returncode == 0, found.stderr
        assert "partial" not in found.stdout and "coverage: text " in found.stdout, found.stdout
        d.wait_notify("vectors", timeout=30)  # STATUS= carries the progress and coverage
    finally:
        d.kill()


def _cached(cache: Path) -> int:
    """Vectors in the embedding cache, read-only (the writer may be mid-transaction)."""
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=1) as db:
            (n,) = db.execute("SELECT COUNT(*) FROM embeddings").fetchone()
    except sqlite3.OperationalError:  # created, schema not yet written
        return 0
    return int(n)


SMALL_SLICES = {"CODECHUNKD_EMBEDDING_BATCH_SIZE": "8"}
"""Slices of 8 texts: the killed-run test needs many slices, not many texts to embed."""


def _index(repo: Repo, index_dir: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``codechunkd index`` in a child, with ``env`` added to the environment."""
    return subprocess.Popen(
        [EXE, "index", str(repo.path), "--index-dir", str(index_dir), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **env) if env else None,
    )


def _reached(proc: subprocess.Popen[str], trace: Path, point: str) -> bool:
    """Whether ``proc`` has reached crash point ``point`` (its trace names it); an exit fails
    the wait, saying what it wrote."""
    assert proc.poll() is None, proc.communicate()
    return trace.exists() and point in trace.read_text()


def test_a_killed_cold_index_keeps_what_it_computed(repo: Repo, index_dir: Path) -> None:
    """SIGINT says what was saved and exits 130; SIGKILL at half the texts loses at most one
    slice: the next run embeds only the rest."""
    files = stdlib_repo(repo, 10)
    settings = load_settings(env=SMALL_SLICES, overrides={"index.dir": str(index_dir)})
    count = counter_for(settings.embedding.model)
    texts = set()
    for rel in files:
        data = (repo.path / rel).read_bytes()
        lang = detect_language(rel, data[:256], settings.chunking.extensions)
        texts |= {
            c.embed_text
            for c in chunk(rel, data, settings.chunking, language=lang, count_tokens=count)
        }
    total = len(texts)
    slice_ = settings.embedding.batch_size
    assert total > 6 * slice_, total
    cache = IndexPaths.of(settings).cache

    # the instant: the first slice is in the cache and most of the work is left; the run's
    # main thread waits there, so the signal cannot come after it has finished
    trace = index_dir.parent / "points.trace"
    held = {**SMALL_SLICES, HOLD_ENV: "cache_put.after:1", TRACE_ENV: str(trace)}
    first = _index(repo, index_dir, held)
    wait_for(
        lambda: _reached(first, trace, "cache_put.after"),
        "the index held at its first cached slice",
        timeout=120,
    )
    assert _cached(cache) > 0
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=scaled(60))
    assert first.returncode == 130, err
    assert "interrupted" in err and "run the same command again" in err, err
    given = shlex.join(["codechunkd", "index", str(repo.path), "--index-dir", str(index_dir)])
    assert f"(`{given} --json`)" in err, err  # the command as given: every option kept
    assert "Traceback" not in err

    second = _index(repo, index_dir, SMALL_SLICES)
    wait_for(lambda: _cached(cache) >= total // 2, "half the texts cached", timeout=180)
    second.kill()
    second.communicate(timeout=scaled(30))
    saved = _cached(cache)
    assert saved >= total // 2

    third = subprocess.run(
        [EXE, "index", str(repo.path), "--index-dir", str(index_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=True,
        env={**os.environ, **SMALL_SLICES},
    )
    report = json.loads(third.stdout)
    assert report["embedded"] == _cached(cache) - saved  # every saved vector was reused
    assert report["embedded"] <= total - total // 2 + slice_, (report, total)

"""``codechunkd verify`` checks the ``references`` table too: the rows the fresh chunks make
against the stored ones, on a real index (a real git repository, LanceDB and model)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lancedb
import pyarrow.compute as pc
from tests.conftest import Indexer, Repo, scaled

from codechunkd.config.settings import Settings
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.verify import verify

EXE = str(Path(sys.executable).parent / "codechunkd")


def test_verify_reports_reference_rows_lost_or_left_over(
    repo: Repo,
    settings: Settings,
    embedder,
    index_dir: Path,  # type: ignore[no-untyped-def]
) -> None:
    """A fresh index verifies, its references included; with a file's call rows deleted
    from the ``references`` table (the chunks untouched), ``verify`` names each missing
    row and the CLI exits 1 saying so; a row the source does not make is extra."""
    repo.write("lib.py", "def parse(x):\n    return x\n")
    repo.write("a.py", "from lib import parse\n\n\ndef one():\n    return parse(1)\n")
    repo.commit("init")
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    report = verify(settings, ix.store, GitSource(repo.path))
    assert report.ok and not report.references_missing, report.as_dict()
    table = lancedb.connect(str(index_dir)).open_table("references")
    table.delete("path = 'a.py' AND kind = 'call'")
    report = verify(settings, ix.store, GitSource(repo.path))
    assert not report.ok and not report.missing and not report.extra
    assert [(r[0], r[2], r[3], r[6]) for r in report.references_missing] == [
        ("a.py", "call", "parse", 5)
    ]
    done = subprocess.run(
        [EXE, "verify", str(repo.path), "--index-dir", str(index_dir)],
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 reference rows missing, 0 extra" in done.stdout, done.stdout
    assert "  missing reference: a.py:5 call parse" in done.stdout, done.stdout
    row = table.to_arrow().filter(pc.equal(pc.field("path"), "lib.py")).slice(0, 1).to_pylist()
    table.add([{**row[0], "id": "0" * 32, "line": 99}])
    report = verify(settings, ix.store, GitSource(repo.path))
    assert [(r[0], r[6]) for r in report.references_extra] == [("lib.py", 99)]
    ix.close()

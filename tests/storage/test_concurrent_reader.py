"""A reader in another process, querying in a loop while the writer replaces a file,
sees no errors and never a file half-replaced."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.conftest import Indexer, Repo, scaled

VERSION_A = "".join(f"def alpha_{i}(x):\n    return x + {i}\n\n\n" for i in range(12))
VERSION_B = "".join(f"def beta_{i}(y):\n    return y * {i}\n\n\n" for i in range(5))

READER = textwrap.dedent(
    """
    import json, sys, time
    from codechunkd.config import load_settings
    from codechunkd.storage.reader import open_index
    index_dir, expected = sys.argv[1], json.loads(sys.argv[2])
    index = open_index(settings=load_settings(overrides={"index.dir": index_dir}))
    seen, errors, reads = set(), [], 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            rows = index.file("mod.py")
            blobs = {r.blob for r in rows}
            if len(blobs) != 1 or len(rows) != expected[blobs.pop()]:
                errors.append([r.blob for r in rows])
            else:
                seen.add(rows[0].blob)
            index.searcher.search("alpha beta", None, k=5, mode="text")
        except Exception as exc:
            errors.append(repr(exc))
        reads += 1
        if len(seen) == 2 and reads > 50:
            break
    print(json.dumps({"reads": reads, "seen": len(seen), "errors": errors[:5]}))
    """
)


@pytest.mark.slow
def test_reader_never_sees_a_file_half_replaced(repo: Repo, indexer: Indexer) -> None:
    """A reader in another process, while one file flips between two versions 400 times,
    only ever sees all of one version's rows."""
    counts = {}
    for text in (VERSION_B, VERSION_A):
        repo.write("mod.py", text)
        indexer.sync(repo.path)
        counts[repo.git("hash-object", "mod.py")] = len(
            [r for r in indexer.rows() if r["path"] == "mod.py"]
        )
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, indexer.paths.uri, json.dumps(counts)],
        stdout=subprocess.PIPE,
        text=True,
    )
    flips = 0
    while reader.poll() is None and flips < 400:
        repo.write("mod.py", VERSION_B if flips % 2 == 0 else VERSION_A)
        indexer.sync(repo.path, paths=["mod.py"])
        flips += 1
    out, _ = reader.communicate(timeout=scaled(120))
    result = json.loads(out)
    assert result["errors"] == []
    assert result["seen"] == 2, result  # the reader did observe both versions
    assert Path(indexer.paths.uri).is_dir()

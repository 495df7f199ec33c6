"""`codechunkd search` with no daemon: read through Lance, the query embedded here, a quick exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from codechunkd.config.settings import Settings
from tests.conftest import Indexer, Repo

EXE = str(Path(sys.executable).parent / "codechunkd")


def _env(embedder) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return dict(os.environ, CODECHUNKD_EMBEDDING_ONNX_DIR=embedder._settings.onnx_dir)


def test_search_without_a_daemon_finds_the_function_and_survives_a_closed_pipe(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """``codechunkd search`` without a daemon finds the function by meaning, and exits 0
    without a traceback when its reader closes the pipe early."""
    repo.write("geo.py", "def haversine_distance(a, b):\n    return great_circle(a, b)\n")
    repo.write("text.py", "def slugify(title):\n    return title.lower().replace(' ', '-')\n")
    repo.commit("init")
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    ix.close()
    argv = [EXE, "search", "distance between two points on a sphere", "--index-dir"]
    done = subprocess.run(
        [*argv, str(index_dir), "--json"], capture_output=True, text=True, env=_env(embedder)
    )
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    assert hits[0]["symbol"] == "haversine_distance"

    # `codechunkd search ... | head -1`: the reader leaves early; no traceback, exit 0
    proc = subprocess.Popen(
        [*argv, str(index_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(embedder)
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err


def test_a_method_snippet_is_dedented_as_one_block(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """A method's snippet shows its body one level inside its `def`, as in the file (the
    chunk's first line lost its indentation; the lines below kept the file's)."""
    repo.write(
        "geo.py",
        "class Point:\n"
        "    def distance_to(self, other):\n"
        '        """Great-circle distance between two points on a sphere."""\n'
        "        return haversine(self, other)\n",
    )
    repo.commit("init")
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    ix.close()
    done = subprocess.run(
        [EXE, "search", "great-circle distance on a sphere", "--index-dir", str(index_dir)],
        capture_output=True,
        text=True,
        env=_env(embedder),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("    def distance_to(self, other):")
    assert lines[at + 1] == '        """Great-circle distance between two points on a sphere."""'
    assert lines[at + 2] == "        return haversine(self, other)"


def test_text_output_escapes_control_characters_in_paths_and_snippets(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """A file name holding a newline cannot forge a hit line of its own, and an escape
    sequence in a file's text does not reach the terminal: both are printed escaped
    (`display.printable`), one line per hit; `--json` keeps the real name."""
    forged = "x.py:1-2  forged  9.9999"
    name = f"evil\n{forged}.py"
    repo.write(name, "def haversine(a, b):\n    return '\x1b[2J' + a + b\n")
    repo.commit("init")
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    ix.close()
    argv = [EXE, "search", "haversine", "--mode", "text", "--index-dir", str(index_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(embedder))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    heads = [line for line in lines if not line.startswith(" ")]
    assert heads == [f"evil\\n{forged}.py:1-2  haversine  {heads[0].rsplit(' ', 1)[1]}"], lines
    assert "\x1b" not in done.stdout and "\\x1b[2J" in done.stdout
    as_json = subprocess.run([*argv, "--json"], capture_output=True, text=True, env=_env(embedder))
    assert [h["path"] for h in json.loads(as_json.stdout)] == [name]

"""Source files crafted against the reference graph: `codechunkd index`, `defs`, `refs` and
`map` on real repositories, through the real CLI, with a hang detector.

Files named alike that import a name from each other made resolution exponential in its
hops (40 files: `map` took 3 minutes); an import of a huge module path copied the path into
every name it bound (a 134 KB file took 1.7 GB to index), and a huge Go or Rust path was
read in quadratic time (`map` over a 400 KB Go import: past 2 minutes); Rust use lists
nested thousands deep crashed the indexer (a segfault past the recursion limit) or lost the
file; generics nested 20,000 deep in an ``impl`` made `map` take 3 minutes; PHP files
that all require each other made resolution exponential in its depth.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from codechunkd.config import load_settings
from codechunkd.storage.reader import open_index
from tests.conftest import Repo, run_cli

pytestmark = pytest.mark.slow

#: A hang detector far above the need (each command answers in seconds here).
HANG_S = 90.0


def _run(*args: str, index: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, index=index, hang_s=HANG_S)


def _indexed(repo: Repo, index: Path) -> None:
    repo.commit("hostile")
    done = _run("index", str(repo.path), index=index)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert "skipped: none" in done.stdout, done.stdout


def test_files_that_import_a_name_from_each_other_resolve_in_polynomial_time(
    repo: Repo, index_dir: Path
) -> None:
    """60 files named ``a.py`` that each do ``from a import f`` (the module names all of
    them) and one that defines ``f``: each lookup followed every file at every hop, 60**4
    steps per import (40 files took `map` 3 minutes).  Now `map` answers, and each caller
    resolves to the one definition, once."""
    repo.write("lib/a.py", "def f():\n    return 1\n")
    for i in range(60):
        repo.write(f"d{i}/a.py", f"from a import f\n\n\ndef g{i}():\n    return f()\n")
    _indexed(repo, index_dir)
    done = _run("map", "--json", index=index_dir)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["path"] == "lib/a.py"
    done = _run("refs", "f", "--calls", "--json", index=index_dir)
    assert done.returncode == 0, done.stderr
    uses = json.loads(done.stdout)
    assert sorted(u["symbol"] for u in uses) == sorted(f"g{i}" for i in range(60))
    assert {(u["resolved"], u["target"]["path"]) for u in uses} == {("imported", "lib/a.py")}


def test_huge_import_paths_are_skipped_not_copied_into_every_name(
    repo: Repo, index_dir: Path
) -> None:
    """An import's module path of 40 KB binding 2,000 names, Rust use lists that each add
    to the path (400 deep, a name at each level), a Go import path of 300,000 parts: the
    references rows held a copy of the path per name (80 MB of them, 1.7 GB of memory at a
    larger size) and `map` read the Go path in quadratic time (minutes).  Now such imports
    are skipped: the rows hold less text than the files, and `map` answers."""
    names = ", ".join(f"x{i}" for i in range(2000))
    repo.write("big.py", f"from {'m' * 40_000} import ({names})\n\n\ndef keep():\n    pass\n")
    repo.write("src/lib.rs", "use " + "a::{x, " * 400 + "x" + "}" * 400 + ";\n")
    repo.write("main.go", f'package main\n\nimport "{"a/" * 300_000}a"\n\nfunc main() {{}}\n')
    _indexed(repo, index_dir)
    size = sum(p.stat().st_size for p in repo.path.rglob("*") if ".git" not in p.parts)
    index = open_index(settings=load_settings(overrides={"index.dir": str(index_dir)}))
    rows = index.refs.store.references_snapshot().scan(["module"])  # type: ignore[union-attr]
    assert sum(len(m) for m in rows.column("module").to_pylist()) < size
    assert [d.symbol for d in index.refs.definitions("keep")] == ["keep"]
    done = _run("map", "--json", index=index_dir)
    assert done.returncode == 0, done.stderr


def test_rust_use_lists_nested_thousands_deep_are_indexed(repo: Repo, index_dir: Path) -> None:
    """``use {{{…crate::x::x…}}};`` 5,000 deep: the walker recursed once per list, and past
    Python's recursion limit the file was lost (``chunking_failed``) or tree-sitter's
    ``node.text`` crashed the indexer (a segfault).  Now the file is indexed and its import
    resolved."""
    deep = "{" * 5000 + "crate::x::x" + "}" * 5000
    repo.write("src/lib.rs", f"use {deep};\n\npub fn run() {{}}\n")
    repo.write("src/x.rs", "pub fn x() {}\n")
    _indexed(repo, index_dir)
    done = _run("defs", "run", "--json", index=index_dir)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert [d["path"] for d in json.loads(done.stdout)] == ["src/lib.rs"]
    done = _run("refs", "x", "--json", index=index_dir)
    assert done.returncode == 0, done.stderr
    assert [(u["path"], u["kind"]) for u in json.loads(done.stdout)] == [("src/lib.rs", "import")]


def test_generics_nested_deep_in_an_impl_do_not_make_the_map_quadratic(
    repo: Repo, index_dir: Path
) -> None:
    """An ``impl Foo<A<A<…>>>`` 20,000 deep (60 KB) with 40 methods: reading each method's
    symbol removed one pair of brackets per pass, `map` took 3 minutes.  Now it answers,
    and a method's callers are found."""
    generics = "Foo" + "<A" * 20_000 + ">" * 20_000
    body = "".join(f"    fn m{i}(&self) {{ self.m{i + 1}(); }}\n" for i in range(40))
    repo.write("src/lib.rs", f"impl {generics} {{\n{body}}}\n")
    _indexed(repo, index_dir)
    done = _run("map", "--json", index=index_dir)
    assert done.returncode == 0, done.stderr
    done = _run("refs", "m1", "--calls", "--json", index=index_dir)
    assert done.returncode == 0, done.stderr
    assert [(u["line"], u["resolved"]) for u in json.loads(done.stdout)] == [(2, "exact")]


def test_php_files_that_all_require_each_other_resolve_in_polynomial_time(
    repo: Repo, index_dir: Path
) -> None:
    """100 PHP files that each ``require_once`` all the others, each calling the next one's
    function and a function defined nowhere: each lookup walked every file's requires at
    every hop, 99**3 steps per name (`map` past 100 s).  Now a file's
    required files are walked once, `map` answers, and each call resolves."""
    n = 100
    for k in range(n):
        requires = "".join(f"require_once 'lib/f{m}.php';\n" for m in range(n) if m != k)
        call = f"f{(k + 1) % n}"
        repo.write(
            f"lib/f{k}.php",
            f"<?php\n{requires}\nfunction f{k}() {{\n  return missing() + {call}();\n}}\n",
        )
    _indexed(repo, index_dir)
    done = _run("map", "--json", index=index_dir)
    assert done.returncode == 0, done.stderr
    done = _run("refs", "f7", "--calls", "--json", index=index_dir)
    assert done.returncode == 0, done.stderr
    uses = json.loads(done.stdout)
    assert [(u["path"], u["resolved"]) for u in uses] == [("lib/f6.php", "imported")]


def test_variables_typed_by_each_other_in_a_cycle_end(repo: Repo, index_dir: Path) -> None:
    """Variables each given a method's result on the next two (``a = b.make()``, ``a =
    c.make()``, ``b = c.make()``, …, round to the first, 300 of them, in Python; one next in
    Go): typing one asks the next ones, round the cycle, branching in two at each step. The
    walk stops ``MAX_WALK`` deep, each row is worked out once per depth, and ``refs`` and
    ``map`` answer: the walk was unbounded (a RecursionError), and cut short without
    remembering what was cut, exponential (15 CPU-s for these 1,206 rows)."""
    n = 300
    lines = "".join(
        f"    v{k} = v{(k + 1) % n}.make()\n    v{k} = v{(k + 2) % n}.make()\n" for k in range(n)
    )
    maker = "class Maker:\n    def make(self):\n        return self\n\n    def go(self):\n"
    maker += "        return 1\n"
    repo.write("cycle.py", f"{maker}\n\ndef loop():\n{lines}    return v0.go()\n")
    go_lines = "".join(f"\tv{k} := v{(k + 1) % n}.Make()\n" for k in range(n))
    go_maker = "type T struct{}\n\nfunc (t *T) Make() *T { return t }\n\nfunc (t *T) Go() {}\n"
    repo.write("cycle.go", f"package main\n\n{go_maker}\nfunc loop() {{\n{go_lines}\tv0.Go()\n}}\n")
    _indexed(repo, index_dir)
    for name in ("go", "make", "Go"):
        done = _run("refs", name, "--json", index=index_dir)
        assert done.returncode == 0, done.stderr
    done = _run("map", "--json", index=index_dir)
    assert done.returncode == 0, done.stderr
